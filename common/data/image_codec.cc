#include "common/data/image_codec.h"

#include <png.h>
#include <setjmp.h>

#include <cstdio>
#include <cstring>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

namespace pstrain {
namespace {

// libjpeg reports errors through error_exit, which must not return: it longjmps back to the
// setjmp in the decode/encode function. Those functions hold no C++ objects with destructors
// between setjmp and the jump, so nothing is skipped.
struct JpegErrors {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JpegFail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  longjmp(errors->jump, 1);
}

// Warnings (level -1) mean corrupt data that libjpeg would paper over with gray pixels, e.g.
// "Premature end of JPEG file" for a truncated image; TF's decode_jpeg fails those too.
void JpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegFail(cinfo);
}

// `errors`, reset, as the error manager of a (de)compressor: each error longjmps to its `jump`.
jpeg_error_mgr* ArmedErrors(JpegErrors* errors) {
  jpeg_error_mgr* mgr = jpeg_std_error(&errors->mgr);
  mgr->error_exit = JpegFail;
  errors->message[0] = '\0';
  return mgr;
}

// Returns false with errors->message set. `pixels` is resized only after the header is read.
bool DecodeJpeg(const uint8_t* data, size_t size, int channels, JpegErrors* errors,
                ImageShape* shape, std::string* pixels) {
  jpeg_decompress_struct cinfo;
  cinfo.err = ArmedErrors(errors);
  errors->mgr.emit_message = JpegMessage;  // warnings fail a decode too
  if (setjmp(errors->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int64_t>(cinfo.image_width) * cinfo.image_height > kMaxDecodedPixels) {
    std::snprintf(errors->message, sizeof(errors->message),
                  "JPEG is %ux%u, more than the %lld pixels allowed", cinfo.image_height,
                  cinfo.image_width, static_cast<long long>(kMaxDecodedPixels));
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  // TF's decode_jpeg defaults: accurate integer DCT, fancy upsampling.
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  shape->height = cinfo.output_height;
  shape->width = cinfo.output_width;
  shape->depth = cinfo.output_components;
  pixels->resize(shape->bytes());
  const size_t stride = static_cast<size_t>(shape->width * shape->depth);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = reinterpret_cast<JSAMPROW>(&(*pixels)[cinfo.output_scanline * stride]);
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

bool EncodeJpeg(const uint8_t* pixels, const ImageShape& shape, int quality, JpegErrors* errors,
                unsigned char** out, unsigned long* out_size) {
  jpeg_compress_struct cinfo;
  cinfo.err = ArmedErrors(errors);
  if (setjmp(errors->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, out, out_size);
  cinfo.image_width = static_cast<JDIMENSION>(shape.width);
  cinfo.image_height = static_cast<JDIMENSION>(shape.height);
  cinfo.input_components = static_cast<int>(shape.depth);
  cinfo.in_color_space = shape.depth == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (quality >= 90) {
    // No chroma subsampling (4:4:4), as PIL and TF's encode_jpeg use at high quality.
    for (int c = 0; c < cinfo.num_components; ++c) {
      cinfo.comp_info[c].h_samp_factor = 1;
      cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(shape.width * shape.depth);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + cinfo.next_scanline * stride);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

Status DecodePng(const std::string& bytes, int channels, const std::string& where,
                 ImageShape* shape, std::string* pixels) {
  // libpng's simplified API reports errors through image.message instead of longjmp.
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return DataLoss(where + ": corrupt PNG (" + image.message + ")");
  }
  if (static_cast<int64_t>(image.width) * image.height > kMaxDecodedPixels) {
    const std::string size = std::to_string(image.height) + "x" + std::to_string(image.width);
    png_image_free(&image);
    return DataLoss(where + ": PNG is " + size + ", more than the " +
                    std::to_string(kMaxDecodedPixels) + " pixels allowed");
  }
  // Colour to gray is done below with JPEG's luma weights, not by libpng (which converts in
  // linear light), so that a PNG and a JPEG of the same picture give the same gray pixels.
  const bool to_luma = channels == 1 && (image.format & PNG_FORMAT_FLAG_COLOR);
  image.format = channels == 1 && !to_luma ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  shape->height = image.height;
  shape->width = image.width;
  shape->depth = to_luma ? 3 : channels;
  // With a null background libpng composites alpha onto what the buffer holds: black.
  pixels->assign(shape->bytes(), '\0');
  if (!png_image_finish_read(&image, nullptr, pixels->data(), 0, nullptr)) {
    pixels->clear();
    return DataLoss(where + ": corrupt PNG (" + image.message + ")");
  }
  if (to_luma) {
    // ITU-R BT.601 in 16-bit fixed point, as libjpeg's RGB to YCbCr.
    const int64_t n = shape->height * shape->width;
    auto* p = reinterpret_cast<uint8_t*>(pixels->data());
    for (int64_t i = 0; i < n; ++i) {
      p[i] = static_cast<uint8_t>((19595 * p[3 * i] + 38470 * p[3 * i + 1] +
                                   7471 * p[3 * i + 2] + 32768) >> 16);
    }
    pixels->resize(n);
    shape->depth = 1;
  }
  return Status::OK();
}

}  // namespace

ImageFormat SniffImageFormat(const std::string& bytes) {
  static const unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xff &&
      static_cast<unsigned char>(bytes[1]) == 0xd8 &&
      static_cast<unsigned char>(bytes[2]) == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Status DecodeImage(const std::string& bytes, int channels, const std::string& where,
                   ImageShape* shape, std::string* pixels) {
  if (channels != 1 && channels != 3) {
    return InvalidArgument(where + ": images decode to 1 or 3 channels, the model wants " +
                           std::to_string(channels));
  }
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kJpeg: {
      JpegErrors errors;
      if (!DecodeJpeg(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels,
                      &errors, shape, pixels)) {
        pixels->clear();
        return DataLoss(where + ": corrupt JPEG (" + errors.message + ")");
      }
      return Status::OK();
    }
    case ImageFormat::kPng:
      return DecodePng(bytes, channels, where, shape, pixels);
    case ImageFormat::kUnknown:
      break;
  }
  char head[64];
  const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data());
  std::snprintf(head, sizeof(head), "%zu bytes starting %02x %02x %02x %02x", bytes.size(),
                bytes.size() > 0 ? b[0] : 0, bytes.size() > 1 ? b[1] : 0,
                bytes.size() > 2 ? b[2] : 0, bytes.size() > 3 ? b[3] : 0);
  return DataLoss(where + ": encoded image is neither JPEG nor PNG (" + head + ")");
}

Result<std::string> EncodeJpegPixels(const uint8_t* pixels, const ImageShape& shape, int quality) {
  if ((shape.depth != 1 && shape.depth != 3) || shape.height < 1 || shape.width < 1) {
    return InvalidArgument("cannot encode a " + shape.ToString() + " image as JPEG");
  }
  JpegErrors errors;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const bool ok = EncodeJpeg(pixels, shape, quality, &errors, &out, &size);
  std::string jpeg = ok ? std::string(reinterpret_cast<char*>(out), size) : std::string();
  std::free(out);
  if (!ok) return Internal(std::string("JPEG encoding failed: ") + errors.message);
  return jpeg;
}

Result<std::string> EncodePngPixels(const uint8_t* pixels, const ImageShape& shape) {
  if ((shape.depth != 1 && shape.depth != 3) || shape.height < 1 || shape.width < 1) {
    return InvalidArgument("cannot encode a " + shape.ToString() + " image as PNG");
  }
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(shape.width);
  image.height = static_cast<png_uint_32>(shape.height);
  image.format = shape.depth == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr)) {
    return Internal(std::string("PNG encoding failed: ") + image.message);
  }
  std::string png(size, '\0');
  if (!png_image_write_to_memory(&image, png.data(), &size, 0, pixels, 0, nullptr)) {
    return Internal(std::string("PNG encoding failed: ") + image.message);
  }
  png.resize(size);
  return png;
}

}  // namespace pstrain
