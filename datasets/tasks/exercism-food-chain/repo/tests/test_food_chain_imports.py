def test_module_imports():
    import food_chain  # noqa: F401
