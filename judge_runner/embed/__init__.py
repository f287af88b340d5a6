"""The sentence embedders: the protocol (``base.py``), the models (``minilm.py``: torch, ONNX Runtime,
OpenVINO; ``hashing.py``: tests), the ONNX export and sessions, and the registry that chooses one per
command (``registry.py``). Below the search, the judge and the query review, which are each given the
command's one embedder; this package imports none of them."""
