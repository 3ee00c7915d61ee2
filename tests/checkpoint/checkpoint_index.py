"""Reads or writes a `checkpoint` index with protobuf's own text-format parser and TensorFlow's
CheckpointState message (tensorflow/python/training/checkpoint_state.proto, rebuilt here so the
test needs protobuf only, which TensorBoard brings).

  checkpoint_index.py parse FILE   -> prints {"model_checkpoint_path", "all_model_checkpoint_paths"}
  checkpoint_index.py write FILE   -> writes an index the way TF 2 does, with timestamps
"""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, text_format


def checkpoint_state_class():
    fdp = descriptor_pb2.FileDescriptorProto(
        name="checkpoint_state.proto", package="tensorflow", syntax="proto3")
    msg = fdp.message_type.add(name="CheckpointState")
    f = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="model_checkpoint_path", number=1, type=f.TYPE_STRING,
                  label=f.LABEL_OPTIONAL)
    msg.field.add(name="all_model_checkpoint_paths", number=2, type=f.TYPE_STRING,
                  label=f.LABEL_REPEATED)
    msg.field.add(name="all_model_checkpoint_timestamps", number=3, type=f.TYPE_DOUBLE,
                  label=f.LABEL_REPEATED)
    msg.field.add(name="last_preserved_timestamp", number=4, type=f.TYPE_DOUBLE,
                  label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tensorflow.CheckpointState")
    try:
        from google.protobuf import message_factory
        return message_factory.GetMessageClass(desc)
    except AttributeError:  # protobuf < 4.22
        return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    mode, path = sys.argv[1], sys.argv[2]
    state = checkpoint_state_class()()
    if mode == "parse":
        with open(path) as f:
            text_format.Parse(f.read(), state)
        print(json.dumps({
            "model_checkpoint_path": state.model_checkpoint_path,
            "all_model_checkpoint_paths": list(state.all_model_checkpoint_paths),
        }))
    elif mode == "write":
        state.model_checkpoint_path = "model.ckpt-300"
        state.all_model_checkpoint_paths.extend(["model.ckpt-200", "model.ckpt-300"])
        state.all_model_checkpoint_timestamps.extend([1700000000.5, 1700000100.25])
        state.last_preserved_timestamp = 1699999999.0
        with open(path, "w") as f:
            f.write(text_format.MessageToString(state))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
