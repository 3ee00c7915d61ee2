#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, standard library only.

Written from the published formats, not from pstrain's code: TFRecord framing (both masked
CRC-32C checked on every record), the protobuf wire format decoded by hand against
TensorFlow's field numbers (event.proto, summary.proto, tensor.proto), and PNG (zlib + the
five scanline filters). Prints one JSON document: {"records": [...]}, one entry per Event.

Usage: decode_events.py EVENT_FILE
"""
import json
import struct
import sys
import zlib

# --- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord masking.
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(data):
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise ValueError("truncated header at offset %d" % pos)
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if length_crc != masked_crc(header):
            raise ValueError("length CRC mismatch at offset %d" % pos)
        body = data[pos + 12:pos + 12 + length]
        footer = data[pos + 12 + length:pos + 16 + length]
        if len(body) != length or len(footer) != 4:
            raise ValueError("truncated record at offset %d" % pos)
        if struct.unpack("<I", footer)[0] != masked_crc(body):
            raise ValueError("data CRC mismatch at offset %d" % pos)
        yield body
        pos += 16 + length


# --- Protobuf wire format.
def read_varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf):
    """Yields (field_number, wire_type, value): int for varint, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wire)
        yield number, wire, value


def signed64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def doubles(wire, value):
    """A repeated double field entry: packed (wire 2) or one fixed64 (wire 1)."""
    if wire == 2:
        return list(struct.unpack("<%dd" % (len(value) // 8), value))
    return [struct.unpack("<d", value)[0]]


# --- PNG: 8-bit, non-interlaced grayscale or RGB, as TensorBoard images are.
def decode_png(png):
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])[0]:
            raise ValueError("PNG chunk CRC mismatch")
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    channels = {0: 1, 2: 3}[color]
    if depth != 8 or interlace != 0:
        raise ValueError("unsupported PNG depth %d / interlace %d" % (depth, interlace))
    raw, stride, bpp = zlib.decompress(idat), width * channels, channels
    pixels, prev = [], [0] * stride
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = list(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        pixels.extend(line)
        prev = line
    return width, height, channels, pixels


# --- TensorFlow messages.
def decode_histogram(buf):
    out = {"kind": "histogram", "bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in fields(buf):
        if number in names:
            out[names[number]] = struct.unpack("<d", value)[0]
        elif number == 6:
            out["bucket_limit"] += doubles(wire, value)
        elif number == 7:
            out["bucket"] += doubles(wire, value)
    for name in names.values():
        out.setdefault(name, 0.0)
    return out


def decode_image(buf):
    out = {"kind": "image", "height": 0, "width": 0, "colorspace": 0}
    names = {1: "height", 2: "width", 3: "colorspace"}
    for number, _, value in fields(buf):
        if number in names:
            out[names[number]] = value
        elif number == 4:
            width, height, channels, pixels = decode_png(value)
            out.update(png_width=width, png_height=height, png_channels=channels, pixels=pixels)
    return out


def decode_tensor(buf):
    out = {"kind": "tensor", "dtype": 0, "dims": [], "string_val": []}
    for number, _, value in fields(buf):
        if number == 1:
            out["dtype"] = value
        elif number == 2:
            for dnum, _, dim in fields(value):
                if dnum == 2:
                    out["dims"] += [signed64(v) for n, _, v in fields(dim) if n == 1] or [0]
        elif number == 8:
            out["string_val"].append(value.decode("utf-8"))
    return out


def decode_metadata(buf):
    plugin_name = ""
    for number, _, value in fields(buf):
        if number == 1:
            for pnum, _, pvalue in fields(value):
                if pnum == 1:
                    plugin_name = pvalue.decode("utf-8")
    return plugin_name


def decode_value(buf):
    out, tag, plugin_name = {"kind": "none"}, "", ""
    for number, _, value in fields(buf):
        if number == 1:
            tag = value.decode("utf-8")
        elif number == 2:
            out = {"kind": "scalar", "value": struct.unpack("<f", value)[0]}
        elif number == 4:
            out = decode_image(value)
        elif number == 5:
            out = decode_histogram(value)
        elif number == 8:
            out = decode_tensor(value)
        elif number == 9:
            plugin_name = decode_metadata(value)
    out.update(tag=tag, plugin_name=plugin_name)
    return out


def decode_event(buf):
    event = {"wall_time": 0.0, "step": 0}
    for number, _, value in fields(buf):
        if number == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2:
            event["step"] = signed64(value)
        elif number == 3:
            event["file_version"] = value.decode("utf-8")
        elif number == 5:
            event["values"] = [decode_value(v) for n, _, v in fields(value) if n == 1]
    return event


def main():
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    records = [decode_event(r) for r in read_records(data)]
    json.dump({"records": records}, sys.stdout, allow_nan=False)


if __name__ == "__main__":
    main()
