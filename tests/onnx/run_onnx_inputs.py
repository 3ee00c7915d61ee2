"""Checks and runs an exported model of named inputs with ONNX's and onnxruntime's own code.

usage: run_onnx_inputs.py MODEL.onnx SPEC.json

SPEC.json: {"inputs": {NAME: {"path": P, "dtype": "float32"|"int64", "shape": [...]}, ...},
            "logits": {"path": P, "shape": [N, CLASSES]}}, each file raw little-endian values:
the batch per input and the logits pstrain computed for it. Prints one JSON object: what
onnx.checker and strict shape inference said, each graph input's element type and dims, the ops,
and how far onnxruntime's logits are from pstrain's. Exits 1 if the model does not check or run.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    model_path, spec_path = sys.argv[1:3]
    with open(spec_path) as f:
        spec = json.load(f)
    feeds = {}
    for name, s in spec["inputs"].items():
        feeds[name] = np.fromfile(s["path"], dtype="<" + np.dtype(s["dtype"]).str[1:]).reshape(
            s["shape"])
    expected = np.fromfile(spec["logits"]["path"], dtype="<f4").reshape(
        spec["logits"]["shape"]).astype(np.float64)

    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, feeds)))
    logits = outputs["logits"].astype(np.float64)
    diff = np.abs(logits - expected)
    report = {
        "checker": "ok",
        "opset": [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")],
        "inputs": {i.name: {"elem_type": i.type.tensor_type.elem_type, "dims": dims(i)}
                   for i in inferred.graph.input},
        "outputs": {o.name: dims(o) for o in inferred.graph.output},
        "ops": sorted({node.op_type for node in model.graph.node}),
        "logits_shape": list(logits.shape),
        "max_abs": float(diff.max()),
        "logit_scale": float(np.max(np.abs(expected))),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
