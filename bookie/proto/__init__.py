"""Wire formats shared by bookie and client: entry format and digests, status codes, gRPC messages."""
