"""The sentence embedders: the protocol, MiniLM on torch, ONNX Runtime or OpenVINO, the hashing embedder
for tests, and the registry that chooses one per command."""
