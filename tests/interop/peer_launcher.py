"""Run the peer zalez/perplexity-agent-mcp 0.4.0 (installed from PyPI) as a stdio MCP
server, pointed at a loopback fake upstream.

The peer hard-codes `API_BASE = "https://api.perplexity.ai"` on purpose (no env
override); its own test-suite reassigns the module attribute in-process, which is what
this launcher does. `main()` is the same entry point as the `perplexity-agent-mcp`
console script, so everything else (framing, dispatch, tools) is the published code.

Env: INTEROP_PEER_API_BASE=http://127.0.0.1:PORT (required; loopback only).
"""

import os
import sys
from urllib.parse import urlsplit

import perplexity_agent_mcp as peer

base = os.environ.get("INTEROP_PEER_API_BASE", "")
parts = urlsplit(base)
if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
    sys.stderr.write(f"peer_launcher: refusing non-loopback base {base!r}\n")
    raise SystemExit(2)
if peer.__version__ != "0.4.0":
    sys.stderr.write(f"peer_launcher: expected perplexity-agent-mcp 0.4.0, got {peer.__version__}\n")
    raise SystemExit(2)

peer.API_BASE = base.rstrip("/")
raise SystemExit(peer.main())
