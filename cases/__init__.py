"""The test cases: each module reproduces an upstream Autotest file or says what it adds."""
