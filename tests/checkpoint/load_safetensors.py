"""Loads a safetensors file with the `safetensors` package and prints, as JSON, its metadata
and each tensor's dtype, shape and raw bytes (hex), for the C++ test to compare bit for bit."""
import json
import sys

from safetensors import safe_open
from safetensors.numpy import load_file


def main():
    path = sys.argv[1]
    tensors = load_file(path)
    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
    print(json.dumps({
        "metadata": metadata,
        "tensors": {
            name: {"dtype": str(t.dtype), "shape": list(t.shape), "hex": t.tobytes().hex()}
            for name, t in tensors.items()
        },
    }))


if __name__ == "__main__":
    main()
