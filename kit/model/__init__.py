"""Talking to models: the gateway and :mod:`kit.model.litellm_private` (the only importers of litellm;
the latter fences every private litellm API the kit uses), the retry policy, the reply and call values,
the action formats a model may answer in, the scripted and embedded models, and ``kit models check``.

May import: the top-level modules, ``kit.records``.
"""
