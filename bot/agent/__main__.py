"""``python -m bot.agent --url URL [...]``: the lean entry point (see ``config.py``)."""

from __future__ import annotations

import logging
import os
import sys

from bot.agent.config import AgentConfig, AgentConfigError, parse_args


def run(config: AgentConfig) -> int:
    from bot.agent.runner import Agent

    agent = Agent(config)
    return agent.run_once() if config.once else agent.run()


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("INCIDENT_BOT_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    try:
        config = parse_args(sys.argv[1:] if argv is None else argv)
    except AgentConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
