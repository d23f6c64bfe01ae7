"""Live catching: `catch` values in a running job, `serve` and read them in another session.

Training side: `catch`. Session side: `serve`, `get`, `get_all`, `ingest_all`, `status`,
`summary`, `help`. Importing this package never imports torch.
"""

from tvis.live.catching import catch
from tvis.live.report import help, status, summary
from tvis.live.session import get, get_all, ingest_all, serve

__all__ = ["catch", "serve", "get", "get_all", "ingest_all", "status", "summary", "help"]
