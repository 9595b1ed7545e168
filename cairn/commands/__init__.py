"""CLI command groups, one module per capability; mounted by cairn/cli.py."""
