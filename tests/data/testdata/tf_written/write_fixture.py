"""Writes tf_images.tfrecord and tf_images_decoded.json with TensorFlow's own code, once.

Run with any TensorFlow 2.x (the fixture in the tree came from tensorflow-cpu 2.21):
  python3 write_fixture.py OUT_DIR
Six 9x7 RGB images with a fixed pattern: three encoded by tf.io.encode_png, three by
tf.io.encode_jpeg (quality 95), as tf.train.Examples with the features TensorFlow's ImageNet and
Flowers conversion scripts write (image/encoded, image/format, image/class/label, image/height,
image/width), through tf.io.TFRecordWriter; then one record whose JPEG is cut short. The JSON
holds, per record, the label and the pixels TensorFlow's decoders give back (HWC, uint8), so the
test compares pstrain's decoding with TensorFlow's, not with the pattern: `pixels` from
tf.io.decode_image's defaults, and for JPEGs `pixels_accurate` from tf.io.decode_jpeg with
dct_method="INTEGER_ACCURATE" (libjpeg's JDCT_ISLOW, what pstrain decodes with; TensorFlow's
default, INTEGER_FAST, rounds up to ~9 levels apart on these high-frequency images).
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

H, W, C = 9, 7, 3


def pattern(i):
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(C), indexing="ij")
    return ((y * 29 + x * 13 + c * 71 + i * 37) % 256).astype(np.uint8)


def example(encoded, fmt, label):
    f = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": f(bytes_list=tf.train.BytesList(value=[encoded])),
        "image/format": f(bytes_list=tf.train.BytesList(value=[fmt])),
        "image/class/label": f(int64_list=tf.train.Int64List(value=[label])),
        "image/height": f(int64_list=tf.train.Int64List(value=[H])),
        "image/width": f(int64_list=tf.train.Int64List(value=[W])),
    })).SerializeToString()


def main(out):
    records, decoded = [], []
    for i in range(6):
        image = pattern(i)
        if i < 3:
            encoded, fmt = tf.io.encode_png(image).numpy(), b"png"
        else:
            encoded, fmt = tf.io.encode_jpeg(image, quality=95).numpy(), b"jpeg"
        label = 10 + i
        records.append(example(encoded, fmt, label))
        pixels = tf.io.decode_image(encoded, channels=C).numpy()
        entry = {"format": fmt.decode(), "label": label, "pixels": pixels.reshape(-1).tolist()}
        if fmt == b"jpeg":
            accurate = tf.io.decode_jpeg(encoded, channels=C, dct_method="INTEGER_ACCURATE")
            entry["pixels_accurate"] = accurate.numpy().reshape(-1).tolist()
        decoded.append(entry)
    whole = tf.io.encode_jpeg(pattern(6), quality=95).numpy()
    records.append(example(whole[:len(whole) // 2], b"jpeg", 16))  # cut short: corrupt
    with tf.io.TFRecordWriter(os.path.join(out, "tf_images.tfrecord")) as w:
        for r in records:
            w.write(r)
    with open(os.path.join(out, "tf_images_decoded.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "height": H, "width": W, "channels": C,
                   "good_records": len(decoded), "corrupt_record": len(decoded),
                   "records": decoded}, f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
