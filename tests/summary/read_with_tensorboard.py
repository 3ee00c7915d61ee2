#!/usr/bin/env python3
"""Reads an event directory with TensorBoard's own EventAccumulator and prints JSON.

Exit status 3 when tensorboard cannot be imported, so the C++ test can skip.
Usage: read_with_tensorboard.py EVENT_DIR
"""
import io
import json
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
except ImportError as e:
    print("cannot import tensorboard: %s" % e, file=sys.stderr)
    sys.exit(3)
from PIL import Image  # a dependency of tensorboard


def main():
    guidance = {k: 0 for k in (ea.COMPRESSED_HISTOGRAMS, ea.IMAGES, ea.AUDIO, ea.SCALARS,
                               ea.HISTOGRAMS, ea.TENSORS)}
    acc = ea.EventAccumulator(sys.argv[1], size_guidance=guidance)
    acc.Reload()
    tags = acc.Tags()
    # The accumulator keeps the number after "brain.Event:", as a float.
    out = {"file_version": acc.file_version, "scalars": {}, "histograms": {}, "images": {},
           "tensors": {}}
    for tag in tags[ea.SCALARS]:
        out["scalars"][tag] = [{"step": e.step, "value": e.value} for e in acc.Scalars(tag)]
    for tag in tags[ea.HISTOGRAMS]:
        out["histograms"][tag] = [
            {"step": e.step, "min": e.histogram_value.min, "max": e.histogram_value.max,
             "num": e.histogram_value.num, "sum": e.histogram_value.sum,
             "sum_squares": e.histogram_value.sum_squares,
             "bucket_total": sum(e.histogram_value.bucket)}
            for e in acc.Histograms(tag)]
    for tag in tags[ea.IMAGES]:
        images = []
        for e in acc.Images(tag):
            png = Image.open(io.BytesIO(e.encoded_image_string))
            rgb = png.convert("RGB")
            images.append({"step": e.step, "width": e.width, "height": e.height,
                           "mode": png.mode, "png_size": list(png.size),
                           "pixels": [list(rgb.getpixel((x, y)))
                                      for y in range(png.height) for x in range(png.width)]})
        out["images"][tag] = images
    for tag in tags[ea.TENSORS]:
        plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
        out["tensors"][tag] = [
            {"step": e.step, "plugin_name": plugin, "dtype": e.tensor_proto.dtype,
             "text": [s.decode("utf-8") for s in e.tensor_proto.string_val]}
            for e in acc.Tensors(tag)]
    # The tags each dashboard of today's TensorBoard lists (it reads through this multiplexer,
    # which also migrates legacy scalar, histogram and image values to tensors).
    multiplexer = pem.EventMultiplexer()
    multiplexer.AddRun(sys.argv[1])
    multiplexer.Reload()
    out["dashboards"] = {
        plugin: sorted(tag for run_tags in multiplexer.PluginRunToTagToContent(plugin).values()
                       for tag in run_tags)
        for plugin in ("scalars", "histograms", "images", "text")}
    json.dump(out, sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()
