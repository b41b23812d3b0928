"""The `gpubot` command: one module per command, the parser and error handling in main.py
(`bot.cli.main:main`, the console script). Nothing is imported here: a package whose `__init__`
imported main.py, which imports the command modules from this package, was an import circle
(tests/test_import_circles.py)."""
