"""`python -m gateway`: serve the gateway with uvicorn, configured by ROLLWRIGHT_* settings."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from gateway.app import create_app
from shared.settings import Settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gateway",
        description="rollwright gateway: GitHub webhooks in, Temporal workflows out. "
        "Configured by ROLLWRIGHT_* environment variables (docs/configuration.md).",
    )
    parser.add_argument("--host", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    args = parser.parse_args(argv)
    # The event loop shares the GIL with short database calls in worker threads (recording
    # deliveries, the outbox drainer). A waiting thread gets the GIL only after the switch
    # interval, and a SQLite transaction needs it after every statement while holding the
    # write lock that the next webhook waits for: 1 ms instead of 5 keeps those waits short.
    sys.setswitchinterval(0.001)
    settings = Settings()
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # their INFO lines carry request URLs (GitHub's, the user lookups of POST /api/deploy)
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=settings.log_level.lower(),
        # Webhook bodies are small; the default keep-alive suits GitHub's connection reuse.
        # loop/http "auto": uvloop and httptools (dependencies) where they are installed.
        proxy_headers=True,
    )


if __name__ == "__main__":
    main()
