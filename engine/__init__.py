"""Copy-as-decode inside vLLM: program mode as a logits processor plus streaming-input
sessions, rewrite mode through vLLM's speculative decoding, and the ``/v1/cad`` routes that
editors reach through ``cad serve --engine URL``. Importing this package does not import
vLLM; its modules that need it do."""
