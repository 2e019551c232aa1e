"""A live, read-only web page over a catalog: runs, failures and results at a glance.

`state` (state.py) computes the JSON the page draws from one snapshot of the catalog;
`make_server` and `serve_in_thread` (server.py) serve the page (page.html) and that
JSON, and nothing else. The page polls `/api/state` every few seconds, so it follows a
sweep while it writes.
"""

from puzzlesweep.dashboard.server import make_server, serve_in_thread
from puzzlesweep.dashboard.state import state

__all__ = ["make_server", "serve_in_thread", "state"]
