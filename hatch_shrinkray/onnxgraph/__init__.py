"""The graph layer: reading and writing models, finding weights at every subgraph depth, the encoder
interface, and rewriting weights into stored tensors plus decode nodes."""
