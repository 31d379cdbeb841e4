"""The ``rewardlab`` command: its subcommands, run directories and the quickstart.

The application is the top layer: it wires the library's packages together and nothing
in the library imports it. ``rewardlab.app.cli:main`` is the console script.
"""
