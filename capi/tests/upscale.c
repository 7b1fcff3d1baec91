/* A tool's use of the C API, run by tests/c_program.rs:
 *   upscale MODEL BACKEND WIDTH HEIGHT IN.rgba OUT.rgba
 * reads WIDTH x HEIGHT RGBA8 texels from IN.rgba, runs them through MODEL on BACKEND
 * (auto, cuda or cpu) with nf_context_infer_rgba8, and writes the output's RGBA8 texels
 * to OUT.rgba. It prints what it learns as key=value lines, and checks the API's
 * conventions on the way (NULL arguments, the string buffers' size-in/size-out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neural_frame.h"

static int fail(const char *what, nf_status s) {
  fprintf(stderr, "upscale: %s failed with status %d: %s\n", what, (int)s, nf_last_error_message());
  return 1;
}

static int check(int ok, const char *what) {
  if (!ok) fprintf(stderr, "upscale: check failed: %s\n", what);
  return !ok;
}

/* Reads a string by the size-in/size-out convention: query, allocate, fill. */
static char *get_string(nf_status (*get)(const nf_context *, char *, size_t *), const nf_context *ctx) {
  size_t len = 0;
  if (get(ctx, NULL, &len) != NF_STATUS_OK || len == 0) return NULL;
  char *buf = malloc(len);
  if (!buf) return NULL;
  size_t cap = len;
  if (get(ctx, buf, &cap) != NF_STATUS_OK || cap != len || buf[len - 1] != '\0') {
    free(buf);
    return NULL;
  }
  return buf;
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: upscale MODEL BACKEND WIDTH HEIGHT IN.rgba OUT.rgba\n");
    return 2;
  }
  const char *model = argv[1], *backend_name = argv[2], *in_path = argv[5], *out_path = argv[6];
  uint32_t width = (uint32_t)strtoul(argv[3], NULL, 10), height = (uint32_t)strtoul(argv[4], NULL, 10);
  nf_backend backend = NF_BACKEND_AUTO;
  if (strcmp(backend_name, "cuda") == 0) backend = NF_BACKEND_CUDA;
  if (strcmp(backend_name, "cpu") == 0) backend = NF_BACKEND_CPU;
  printf("version=%s\n", nf_version());
  if (check(strcmp(nf_version(), NF_VERSION) == 0 && nf_version_number() == NF_VERSION_NUMBER &&
                NF_VERSION_NUMBER == NF_VERSION_MAJOR * 1000000 + NF_VERSION_MINOR * 1000 + NF_VERSION_PATCH,
            "the header's version is the library's"))
    return 1;

  /* Conventions: a NULL where a pointer is needed is refused with a message. */
  nf_builder *none = NULL;
  nf_status s = nf_builder_new(NULL, &none);
  if (check(s == NF_STATUS_INVALID_ARGUMENT && none == NULL && strstr(nf_last_error_message(), "model_path"),
            "nf_builder_new(NULL) is NF_STATUS_INVALID_ARGUMENT naming model_path"))
    return 1;

  size_t in_len = (size_t)width * height * 4;
  uint8_t *input = malloc(in_len);
  FILE *f = fopen(in_path, "rb");
  if (!input || !f || fread(input, 1, in_len, f) != in_len) {
    fprintf(stderr, "upscale: cannot read %zu bytes from %s\n", in_len, in_path);
    return 1;
  }
  fclose(f);

  nf_builder *builder = NULL;
  if ((s = nf_builder_new(model, &builder)) != NF_STATUS_OK) return fail("nf_builder_new", s);
  if (check(nf_last_error_message()[0] == '\0', "a success leaves an empty message")) return 1;
  if ((s = nf_builder_set_backend(builder, backend)) != NF_STATUS_OK) return fail("nf_builder_set_backend", s);
  if (check(nf_builder_set_backend(builder, 99) == NF_STATUS_INVALID_ARGUMENT, "backend 99 is refused")) return 1;
  /* A versioned struct: its init macro sets struct_size; without it the call is refused. */
  nf_cuda_options cuda = NF_CUDA_OPTIONS_INIT;
  if ((s = nf_cuda_options_default(&cuda)) != NF_STATUS_OK) return fail("nf_cuda_options_default", s);
  if (check(cuda.struct_size == sizeof cuda && cuda.cuda_graph == 1, "the defaults, struct_size kept")) return 1;
  nf_cuda_options unset = cuda;
  unset.struct_size = 0;
  if (check(nf_builder_set_cuda_options(builder, &unset) == NF_STATUS_STRUCT_SIZE &&
                strstr(nf_last_error_message(), "NF_CUDA_OPTIONS_INIT"),
            "a struct_size of 0 is NF_STATUS_STRUCT_SIZE naming the init macro"))
    return 1;
  cuda.precision = NF_PRECISION_FP32;
  if ((s = nf_builder_set_cuda_options(builder, &cuda)) != NF_STATUS_OK) return fail("nf_builder_set_cuda_options", s);
  if ((s = nf_builder_set_slots(builder, 2)) != NF_STATUS_OK) return fail("nf_builder_set_slots", s);
  /* Another size than the input's: nf_context_infer_rgba8 resizes the context. */
  if ((s = nf_builder_set_frame_size(builder, 16, 8)) != NF_STATUS_OK) return fail("nf_builder_set_frame_size", s);

  nf_context *ctx = NULL;
  s = nf_context_new(builder, &ctx);
  nf_builder_free(builder); /* the context does not keep it */
  if (s != NF_STATUS_OK) return fail("nf_context_new", s);

  char *backend_ran = get_string(nf_context_backend_name, ctx);
  char *device = get_string(nf_context_device_name, ctx);
  if (check(backend_ran && device, "the report's strings")) return 1;
  printf("backend=%s\ndevice=%s\n", backend_ran, device);
  char tiny[2];
  size_t tiny_len = sizeof tiny;
  s = nf_context_device_name(ctx, tiny, &tiny_len);
  if (check(s == NF_STATUS_BUFFER_TOO_SMALL && tiny_len == strlen(device) + 1,
            "a small buffer is NF_STATUS_BUFFER_TOO_SMALL with the size needed"))
    return 1;
  free(backend_ran);
  free(device);

  uint32_t sx = 0, sy = 0, ow = 0, oh = 0;
  if ((s = nf_context_scale(ctx, &sx, &sy)) != NF_STATUS_OK) return fail("nf_context_scale", s);
  printf("scale=%ux%u\n", sx, sy);
  size_t out_len = (size_t)width * sx * height * sy * 4;
  uint8_t *output = malloc(out_len);
  if (!output) return 1;
  /* Poisoned, so that texels the frame does not write show. */
  for (size_t i = 0; i < out_len; i++) output[i] = (uint8_t)(0xAB ^ (i & 0x0F));
  s = nf_context_infer_rgba8(ctx, input, width, height, output, out_len - 1);
  if (check(s == NF_STATUS_BUFFER_TOO_SMALL, "an output buffer one byte short is refused")) return 1;
  if ((s = nf_context_infer_rgba8(ctx, input, width, height, output, out_len)) != NF_STATUS_OK)
    return fail("nf_context_infer_rgba8", s);
  if ((s = nf_context_output_size(ctx, &ow, &oh)) != NF_STATUS_OK) return fail("nf_context_output_size", s);
  printf("output=%ux%u\n", ow, oh);
  if (check(ow == width * sx && oh == height * sy, "the output size after the resize")) return 1;

  f = fopen(out_path, "wb");
  if (!f || fwrite(output, 1, out_len, f) != out_len || fclose(f) != 0) {
    fprintf(stderr, "upscale: cannot write %s\n", out_path);
    return 1;
  }
  nf_context_free(ctx);
  nf_context_free(NULL);
  free(input);
  free(output);
  printf("ok\n");
  return 0;
}
