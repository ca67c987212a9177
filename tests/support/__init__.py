"""What the fast tests share with e2e/: constants and readers of the Dockerfile and manifests."""
