"""tvis.tui: the terminal viewer (a Textual app) over the agent client.

Never imports torch: the viewer runs on a laptop with numpy, textual and msgpack alone.
"""
