"""Language grammars behind the Matcher interface."""
