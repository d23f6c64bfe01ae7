"""The agent: the query API over a runs root, the views it computes next to the data, the
stdio server that `tvis agent --stdio` runs, and the clients (in-process and over ssh).

See PROTOCOL.md. Imports numpy, msgpack and ``tvis.store`` only: never torch or textual.
"""
