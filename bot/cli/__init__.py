"""The `gpubot` command: one module per command, the parser and error handling in main.py."""

from bot.cli.main import main

__all__ = ["main"]
