"""One module per BookKeeper HTTP service (org.apache.bookkeeper.server.http.service), named after it."""
