"""What the service tells its operators: Prometheus metrics (``metrics``, served apart from
the API by ``metrics_server``), storage calls timed per backend (``instrumented_storage``),
request ids, the access log and the request body policy as pure ASGI middleware
(``request_context``, ``json_depth``), and JSON logs (``json_logs``)."""
