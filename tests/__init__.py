"""The framework's own tests: model against upstream vectors, harness, rigs, backends, report."""
