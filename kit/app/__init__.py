"""What a person runs: the CLI (``python -m kit``, including the ``tasks`` subcommands), the notebook
helpers and ``kit notebooks``, ``kit lab``, and the prompt lab.

May import: anything in the kit.
"""
