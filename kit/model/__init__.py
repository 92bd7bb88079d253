"""Talking to models: the gateway (the only importer of litellm), its retry policy, the one module that
touches litellm's private APIs, the action formats a model may answer in, the scripted and embedded
models, and ``kit models check``.

May import: the top-level modules, ``kit.records``.
"""
