"""Checks and runs a model pstrain-export wrote, with ONNX's and onnxruntime's own code.

usage: run_onnx.py MODEL.onnx INPUT.f32 LOGITS.f32 N C H W CLASSES

INPUT.f32 and LOGITS.f32 hold raw little-endian float32: the batch [N, C, H, W] and the logits
[N, CLASSES] pstrain computed for it. Prints one JSON object: what onnx.checker and strict shape
inference said, the graph's inputs and outputs, and how far onnxruntime's logits (and
probabilities) are from pstrain's. Exits 1 if the model does not check or run.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    model_path, input_path, logits_path = sys.argv[1:4]
    n, c, h, w, classes = (int(v) for v in sys.argv[4:9])
    x = np.fromfile(input_path, dtype="<f4").reshape(n, c, h, w)
    expected = np.fromfile(logits_path, dtype="<f4").reshape(n, classes).astype(np.float64)

    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)

    def dims(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, {"input": x})))
    logits = outputs["logits"].astype(np.float64)
    diff = np.abs(logits - expected)
    scale = float(np.max(np.abs(expected)))
    report = {
        "checker": "ok",
        "opset": [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")],
        "inputs": {i.name: dims(i) for i in inferred.graph.input},
        "outputs": {o.name: dims(o) for o in inferred.graph.output},
        "ops": sorted({node.op_type for node in model.graph.node}),
        "logits_shape": list(logits.shape),
        "max_abs": float(diff.max()),
        "logit_scale": scale,
        # Relative to the logits' scale: a near-zero logit makes elementwise ratios meaningless.
        "max_rel": float(diff.max() / max(scale, 1e-30)),
    }
    if "probabilities" in outputs:
        e = np.exp(expected - expected.max(axis=1, keepdims=True))
        report["probabilities_max_abs"] = float(
            np.abs(outputs["probabilities"] - e / e.sum(axis=1, keepdims=True)).max())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
