"""`incident-bot agent`: the host agent, forwarded to ``bot.agent`` (its own parser).

The agent module imports nothing heavy; on a host, prefer ``python -m bot.agent`` (the
systemd unit does) so the CLI's other commands are never imported next to the work.
"""

from __future__ import annotations

import typer

from bot.core.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command(name="agent", add_help_option=False,
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def agent(ctx: typer.Context) -> None:
        """Host agent: NVML, boot id and disk checks posting alerts (--help for options)."""
        from bot.agent.__main__ import run, setup_logging
        from bot.agent.config import AgentConfigError, parse_args

        setup_logging()
        try:
            config = parse_args(list(ctx.args))
        except AgentConfigError as exc:
            raise UserError(str(exc), 2) from None
        except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
            raise typer.Exit(int(exc.code or 0)) from None
        code = run(config)
        if code:
            raise typer.Exit(code)
