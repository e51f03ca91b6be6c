"""The compliance console: a browser UI at /console for compliance officers (subject look-up,
export, erasure with a receipt verified in the browser, audit, legal holds, storage), served
as static files shipped in the package (built from console/ in the repository)."""
