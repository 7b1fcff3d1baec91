// A renderer with its own Vulkan instance and device, in plain Vulkan C calls, hands its
// frames to neural-frame through the C API and reads the results back itself.
//
//   renderer --model M.onnx --input IN.png --output OUT.png
//            [--frames N] [--backend auto|cpu|cuda] [--ort-library PATH] [--compare] [--report]
//
// The context is built on the renderer's device and queue (nf_context_new_on_device) and
// takes its images and timeline semaphores by handle. Per frame the renderer "draws" (copies
// the picture from a staging buffer into its input image, on its queue, signalling
// `rendered = n`), submits the frame with that wait (and "output free after `read = n - 1`"),
// and queues a copy of the result into a host-visible buffer that waits on the GPU for the
// ticket's "output ready"; it draws into the input again only after the ticket's "input
// consumed" (a GPU wait too). The host waits once, at the end, for `read = N`. The images'
// memory is allocated exportable where the driver can (OPAQUE_FD): on the CUDA backend the
// context then runs the frames' passes as CUDA kernels.
//
// --compare runs the same picture through a context of its own with nf_context_infer_rgba8
// and says whether the two results are equal byte for byte (exit code 2 where not).
// Built by capi/examples/CMakeLists.txt against the installed package (capi/ci.sh).

#include <vulkan/vulkan.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "neural_frame.h"

namespace {

[[noreturn]] void fail(const std::string &what) { throw std::runtime_error(what); }

void vk_check(VkResult r, const char *call) {
  if (r != VK_SUCCESS) fail(std::string(call) + " failed with VkResult " + std::to_string(static_cast<int>(r)));
}

void nf_check(nf_status s, const char *call) {
  if (s != NF_STATUS_OK)
    fail(std::string(call) + " failed (status " + std::to_string(static_cast<int>(s)) + "): " +
         nf_last_error_message());
}

// What the library announces (a fallback to the CPU backend, an option not in effect), on
// stderr. Called from any thread the library logs on: stderr is fine for that.
extern "C" void log_to_stderr(void *, nf_log_level level, const char *message) {
  std::fprintf(stderr, "neural-frame %s: %s\n", level <= NF_LOG_WARN ? "warning" : "info", message);
}

// A string the C API returns by the size-in/size-out convention.
std::string nf_string(nf_status (*get)(const nf_context *, char *, size_t *), const nf_context *ctx) {
  size_t len = 0;
  nf_check(get(ctx, nullptr, &len), "a string query");
  std::string text(len, '\0');
  nf_check(get(ctx, text.data(), &len), "a string");
  text.resize(len ? len - 1 : 0);
  return text;
}

struct Args {
  std::string model, input, output, ort_library;
  uint64_t frames = 3;
  nf_backend backend = NF_BACKEND_AUTO;
  bool compare = false, report = false;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--model") a.model = value();
    else if (flag == "--input") a.input = value();
    else if (flag == "--output") a.output = value();
    else if (flag == "--ort-library") a.ort_library = value();
    else if (flag == "--frames") {
      a.frames = std::strtoull(value().c_str(), nullptr, 10);
      if (a.frames < 1) fail("--frames takes a count of 1 or more");
    } else if (flag == "--backend") {
      std::string b = value();
      if (b == "auto") a.backend = NF_BACKEND_AUTO;
      else if (b == "cpu") a.backend = NF_BACKEND_CPU;
      else if (b == "cuda") a.backend = NF_BACKEND_CUDA;
      else fail("--backend takes auto, cpu or cuda, not `" + b + "`");
    } else if (flag == "--compare") a.compare = true;
    else if (flag == "--report") a.report = true;
    else if (flag == "--help" || flag == "-h") {
      std::printf("renderer --model M.onnx --input IN.png --output OUT.png [--frames N] "
                  "[--backend auto|cpu|cuda] [--ort-library PATH] [--compare] [--report]\n");
      std::exit(0);
    } else fail("unknown argument `" + flag + "` (see --help)");
  }
  if (a.model.empty() || a.input.empty() || a.output.empty()) fail("--model, --input and --output are needed");
  return a;
}

// The renderer's Vulkan objects.
struct Renderer {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t family = 0;
  VkQueue queue = VK_NULL_HANDLE;
  VkQueue post_queue = VK_NULL_HANDLE;  // a second queue of the family, for the context's post passes
  VkCommandPool pool = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory{};
  std::vector<const char *> extensions;  // the device extensions it was created with
  bool exportable = false;               // VK_KHR_external_memory_fd
  std::string name;
};

struct Image {
  VkImage image = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  uint32_t width = 0, height = 0;
  VkImageUsageFlags usage = 0;
};

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void *mapped = nullptr;
};

bool has_extension(const std::vector<VkExtensionProperties> &list, const char *name) {
  for (const auto &e : list)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// An instance for Vulkan 1.2 and a device on the first suitable physical device (a GPU
// before a CPU implementation such as lavapipe), with timeline semaphores and the
// external memory and semaphore fd extensions where the driver has them.
Renderer make_renderer() {
  Renderer r;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "neural-frame C++ renderer";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  vk_check(vkCreateInstance(&info, nullptr, &r.instance), "vkCreateInstance");

  uint32_t count = 0;
  vk_check(vkEnumeratePhysicalDevices(r.instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  vk_check(vkEnumeratePhysicalDevices(r.instance, &count, devices.data()), "vkEnumeratePhysicalDevices");
  int best = -1;
  for (VkPhysicalDevice p : devices) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(p, &props);
    VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
    timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
    VkPhysicalDeviceFeatures2 features{};
    features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features.pNext = &timeline;
    vkGetPhysicalDeviceFeatures2(p, &features);
    if (props.apiVersion < VK_API_VERSION_1_2 || !timeline.timelineSemaphore) continue;
    int rank = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU     ? 3
               : props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 2
               : props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU            ? 0
                                                                            : 1;
    if (rank > best) {
      best = rank;
      r.physical = p;
      r.name = props.deviceName;
    }
  }
  if (r.physical == VK_NULL_HANDLE) fail("no Vulkan 1.2 device with timeline semaphores");

  vkGetPhysicalDeviceQueueFamilyProperties(r.physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(r.physical, &count, families.data());
  bool found = false;
  for (uint32_t i = 0; i < count && !found; i++) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && (families[i].queueFlags & VK_QUEUE_TRANSFER_BIT)) {
      r.family = i;
      found = true;
    }
  }
  if (!found) fail("no queue family with compute and transfer");
  const uint32_t queues = families[r.family].queueCount >= 2 ? 2 : 1;

  vk_check(vkEnumerateDeviceExtensionProperties(r.physical, nullptr, &count, nullptr), "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> available(count);
  vk_check(vkEnumerateDeviceExtensionProperties(r.physical, nullptr, &count, available.data()),
           "vkEnumerateDeviceExtensionProperties");
  for (const char *name : {VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME})
    if (has_extension(available, name)) r.extensions.push_back(name);
  r.exportable = has_extension(available, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);

  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = r.family;
  queue.queueCount = queues;
  queue.pQueuePriorities = priorities;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  timeline.timelineSemaphore = VK_TRUE;  // neural-frame needs it on the caller's device
  VkDeviceCreateInfo dev{};
  dev.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dev.pNext = &timeline;
  dev.queueCreateInfoCount = 1;
  dev.pQueueCreateInfos = &queue;
  dev.enabledExtensionCount = static_cast<uint32_t>(r.extensions.size());
  dev.ppEnabledExtensionNames = r.extensions.data();
  vk_check(vkCreateDevice(r.physical, &dev, nullptr, &r.device), "vkCreateDevice");
  vkGetDeviceQueue(r.device, r.family, 0, &r.queue);
  if (queues == 2) vkGetDeviceQueue(r.device, r.family, 1, &r.post_queue);
  vkGetPhysicalDeviceMemoryProperties(r.physical, &r.memory);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.queueFamilyIndex = r.family;
  vk_check(vkCreateCommandPool(r.device, &pool, nullptr, &r.pool), "vkCreateCommandPool");
  return r;
}

uint32_t memory_type(const Renderer &r, uint32_t bits, VkMemoryPropertyFlags flags) {
  for (uint32_t i = 0; i < r.memory.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (r.memory.memoryTypes[i].propertyFlags & flags) == flags) return i;
  fail("no memory type with the flags asked for");
}

// A device-local 2D RGBA8 image of the renderer's, its memory exportable (OPAQUE_FD) and
// dedicated where the driver can.
Image make_image(const Renderer &r, uint32_t width, uint32_t height, VkImageUsageFlags usage) {
  Image img;
  img.width = width;
  img.height = height;
  img.usage = usage;
  VkExternalMemoryImageCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMAGE_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkImageCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO;
  info.pNext = r.exportable ? &external : nullptr;
  info.imageType = VK_IMAGE_TYPE_2D;
  info.format = VK_FORMAT_R8G8B8A8_UNORM;
  info.extent = {width, height, 1};
  info.mipLevels = 1;
  info.arrayLayers = 1;
  info.samples = VK_SAMPLE_COUNT_1_BIT;
  info.tiling = VK_IMAGE_TILING_OPTIMAL;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;
  vk_check(vkCreateImage(r.device, &info, nullptr, &img.image), "vkCreateImage");
  VkMemoryRequirements req;
  vkGetImageMemoryRequirements(r.device, img.image, &req);
  VkMemoryDedicatedAllocateInfo dedicated{};
  dedicated.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO;
  dedicated.image = img.image;
  VkExportMemoryAllocateInfo exported{};
  exported.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO;
  exported.pNext = &dedicated;
  exported.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.pNext = r.exportable ? &exported : nullptr;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = memory_type(r, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  vk_check(vkAllocateMemory(r.device, &alloc, nullptr, &img.memory), "vkAllocateMemory");
  vk_check(vkBindImageMemory(r.device, img.image, img.memory, 0), "vkBindImageMemory");
  img.size = req.size;
  return img;
}

// A host-visible, coherent buffer, mapped.
Buffer make_buffer(const Renderer &r, VkDeviceSize size, VkBufferUsageFlags usage) {
  Buffer b;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vkCreateBuffer(r.device, &info, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(r.device, b.buffer, &req);
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex =
      memory_type(r, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  vk_check(vkAllocateMemory(r.device, &alloc, nullptr, &b.memory), "vkAllocateMemory");
  vk_check(vkBindBufferMemory(r.device, b.buffer, b.memory, 0), "vkBindBufferMemory");
  vk_check(vkMapMemory(r.device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  return b;
}

VkSemaphore make_timeline(const Renderer &r) {
  VkSemaphoreTypeCreateInfo type{};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  info.pNext = &type;
  VkSemaphore s;
  vk_check(vkCreateSemaphore(r.device, &info, nullptr, &s), "vkCreateSemaphore");
  return s;
}

VkCommandBuffer begin(const Renderer &r) {
  VkCommandBufferAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = r.pool;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  VkCommandBuffer cmd;
  vk_check(vkAllocateCommandBuffers(r.device, &info, &cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  vk_check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
  return cmd;
}

void barrier(VkCommandBuffer cmd, VkImage image, VkImageLayout from, VkImageLayout to, VkAccessFlags src_access,
             VkAccessFlags dst_access, VkPipelineStageFlags src_stage, VkPipelineStageFlags dst_stage) {
  VkImageMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER;
  b.srcAccessMask = src_access;
  b.dstAccessMask = dst_access;
  b.oldLayout = from;
  b.newLayout = to;
  b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.image = image;
  b.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, nullptr, 0, nullptr, 1, &b);
}

VkBufferImageCopy whole(uint32_t width, uint32_t height) {
  VkBufferImageCopy copy{};
  copy.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
  copy.imageExtent = {width, height, 1};
  return copy;
}

// One submission of the renderer's: `cmd` after timeline waits, then timeline signals,
// under the queue lock it shares with the context.
void submit(const Renderer &r, const nf_queue_lock *lock, VkCommandBuffer cmd,
            const std::vector<std::pair<VkSemaphore, uint64_t>> &waits,
            const std::vector<std::pair<VkSemaphore, uint64_t>> &signals, VkFence fence = VK_NULL_HANDLE) {
  std::vector<VkSemaphore> wait_sems, signal_sems;
  std::vector<uint64_t> wait_values, signal_values;
  std::vector<VkPipelineStageFlags> stages;
  for (const auto &w : waits) {
    wait_sems.push_back(w.first);
    wait_values.push_back(w.second);
    stages.push_back(VK_PIPELINE_STAGE_TRANSFER_BIT);
  }
  for (const auto &s : signals) {
    signal_sems.push_back(s.first);
    signal_values.push_back(s.second);
  }
  VkTimelineSemaphoreSubmitInfo values{};
  values.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
  values.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  values.pWaitSemaphoreValues = wait_values.data();
  values.signalSemaphoreValueCount = static_cast<uint32_t>(signal_values.size());
  values.pSignalSemaphoreValues = signal_values.data();
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.pNext = &values;
  info.waitSemaphoreCount = static_cast<uint32_t>(wait_sems.size());
  info.pWaitSemaphores = wait_sems.data();
  info.pWaitDstStageMask = stages.data();
  info.commandBufferCount = 1;
  info.pCommandBuffers = &cmd;
  info.signalSemaphoreCount = static_cast<uint32_t>(signal_sems.size());
  info.pSignalSemaphores = signal_sems.data();
  nf_check(nf_queue_lock_acquire(lock), "nf_queue_lock_acquire");
  VkResult result = vkQueueSubmit(r.queue, 1, &info, fence);
  nf_check(nf_queue_lock_release(lock), "nf_queue_lock_release");
  vk_check(result, "vkQueueSubmit");
}

VkSemaphore semaphore_of(uint64_t raw) {
  VkSemaphore s;
  std::memcpy(&s, &raw, sizeof s);
  return s;
}

uint64_t raw_of(VkSemaphore s) {
  uint64_t raw = 0;
  std::memcpy(&raw, &s, sizeof s);
  return raw;
}

uint64_t raw_of(VkImage i) {
  uint64_t raw = 0;
  std::memcpy(&raw, &i, sizeof i);
  return raw;
}

uint64_t raw_of(VkDeviceMemory m) {
  uint64_t raw = 0;
  std::memcpy(&raw, &m, sizeof m);
  return raw;
}

int run(const Args &a) {
  uint32_t w = 0, h = 0;
  uint8_t *picture = nullptr;
  nf_check(nf_image_read(a.input.c_str(), &w, &h, &picture), "nf_image_read");
  const size_t in_len = static_cast<size_t>(w) * h * 4;

  Renderer r = make_renderer();
  nf_queue_lock *lock = nullptr;
  nf_check(nf_queue_lock_new(&lock), "nf_queue_lock_new");

  // The context, on the renderer's device and queue: everything by handle. The header this
  // program was built with must be the library's (or older, of the same minor while 0.x).
  if (nf_version_number() < NF_VERSION_NUMBER || nf_version_number() / 1000 != NF_VERSION_NUMBER / 1000)
    fail(std::string("built against neural-frame ") + NF_VERSION + ", running with " + nf_version());
  nf_check(nf_set_log_callback(log_to_stderr, nullptr, NF_LOG_WARN), "nf_set_log_callback");
  nf_builder *builder = nullptr;
  nf_check(nf_builder_new(a.model.c_str(), &builder), "nf_builder_new");
  nf_check(nf_builder_set_backend(builder, a.backend), "nf_builder_set_backend");
  nf_check(nf_builder_set_frame_size(builder, w, h), "nf_builder_set_frame_size");
  nf_check(nf_builder_set_slots(builder, 2), "nf_builder_set_slots");
  if (!a.ort_library.empty())
    nf_check(nf_builder_set_ort_library(builder, a.ort_library.c_str()), "nf_builder_set_ort_library");
  nf_vulkan_device device = NF_VULKAN_DEVICE_INIT;  // struct_size set, the rest 0
  device.get_instance_proc_addr = reinterpret_cast<nf_vk_get_instance_proc_addr>(vkGetInstanceProcAddr);
  device.instance = r.instance;
  device.api_version = VK_API_VERSION_1_2;
  device.physical_device = r.physical;
  device.device = r.device;
  device.queue_family_index = r.family;
  device.queue = r.queue;
  device.post_queue = r.post_queue;  // NULL where the family has one queue (lavapipe)
  device.enabled_device_extensions = r.extensions.data();
  device.enabled_device_extension_count = static_cast<uint32_t>(r.extensions.size());
  device.queue_lock = lock;
  nf_context *ctx = nullptr;
  nf_status built = nf_context_new_on_device(builder, &device, &ctx);
  if (built != NF_STATUS_OK) {
    nf_builder_free(builder);
    nf_check(built, "nf_context_new_on_device");
  }
  bool settled = false;
  nf_check(nf_context_wait_settled(ctx, 300000, &settled), "nf_context_wait_settled");
  nf_sync_mode mode = NF_SYNC_HOST;
  nf_check(nf_context_sync_mode(ctx, &mode), "nf_context_sync_mode");
  uint32_t ow = 0, oh = 0;
  nf_check(nf_context_output_size(ctx, &ow, &oh), "nf_context_output_size");
  const size_t out_len = static_cast<size_t>(ow) * oh * 4;
  std::string fallback = nf_string(nf_context_fallback_reason, ctx);
  std::printf("renderer: \"%s\"; context: %s backend on %s, %s sync%s%s\n", r.name.c_str(),
              nf_string(nf_context_backend_name, ctx).c_str(), nf_string(nf_context_device_name, ctx).c_str(),
              mode == NF_SYNC_GPU ? "GPU" : "host", fallback.empty() ? "" : "; fell back to the CPU: ",
              fallback.c_str());
  if (a.report) std::printf("%s", nf_string(nf_context_report, ctx).c_str());

  // The renderer's resources: input and output images, the picture in a staging buffer
  // (put there once: every frame is "drawn" from it), a host-visible buffer for results.
  Image input = make_image(r, w, h, VK_IMAGE_USAGE_TRANSFER_DST_BIT | NF_INPUT_IMAGE_USAGE);
  Image output = make_image(r, ow, oh, VK_IMAGE_USAGE_TRANSFER_SRC_BIT | NF_OUTPUT_IMAGE_USAGE);
  Buffer scene = make_buffer(r, in_len, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
  Buffer result = make_buffer(r, out_len, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  std::memcpy(scene.mapped, picture, in_len);
  VkSemaphore rendered = make_timeline(r), read = make_timeline(r);

  // Both images to GENERAL, where they stay (the context reads and writes them there).
  VkCommandBuffer setup = begin(r);
  barrier(setup, input.image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_GENERAL, 0, 0,
          VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  barrier(setup, output.image, VK_IMAGE_LAYOUT_UNDEFINED, VK_IMAGE_LAYOUT_GENERAL, 0, 0,
          VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  vk_check(vkEndCommandBuffer(setup), "vkEndCommandBuffer");
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence;
  vk_check(vkCreateFence(r.device, &fence_info, nullptr, &fence), "vkCreateFence");
  submit(r, lock, setup, {}, {}, fence);
  vk_check(vkWaitForFences(r.device, 1, &fence, VK_TRUE, 30000000000ull), "vkWaitForFences");

  // The renderer's "draw" and its read of the result, recorded once.
  VkCommandBuffer draw = begin(r);
  VkBufferImageCopy in_copy = whole(w, h);
  vkCmdCopyBufferToImage(draw, scene.buffer, input.image, VK_IMAGE_LAYOUT_GENERAL, 1, &in_copy);
  vk_check(vkEndCommandBuffer(draw), "vkEndCommandBuffer");
  VkCommandBuffer read_back = begin(r);
  VkBufferImageCopy out_copy = whole(ow, oh);
  vkCmdCopyImageToBuffer(read_back, output.image, VK_IMAGE_LAYOUT_GENERAL, result.buffer, 1, &out_copy);
  VkMemoryBarrier to_host{};
  to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(read_back, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                       nullptr, 0, nullptr);
  vk_check(vkEndCommandBuffer(read_back), "vkEndCommandBuffer");

  // Register once: the images with their memory (exportable: CUDA's passes reach them), the
  // "rendered" and "read" timelines.
  const int32_t rgba8 = VK_FORMAT_R8G8B8A8_UNORM, optimal = VK_IMAGE_TILING_OPTIMAL, general = VK_IMAGE_LAYOUT_GENERAL;
  // Both in GENERAL: the input when "rendered" is reached (the draw leaves it so), the output
  // when "output ready" is reached (the context writes it in GENERAL and leaves it so).
  auto describe = [&](const Image &image, uint32_t width, uint32_t height) {
    nf_caller_image d = NF_CALLER_IMAGE_INIT;
    d.image = raw_of(image.image);
    d.format = rgba8;
    d.width = width;
    d.height = height;
    d.usage = image.usage;
    d.tiling = optimal;
    d.layout = general;
    return d;
  };
  nf_caller_image in_desc = describe(input, w, h);
  nf_caller_image out_desc = describe(output, ow, oh);
  nf_input in_id = 0;
  nf_output out_id = 0;
  if (r.exportable) {
    auto memory_of = [](const Image &image) {
      nf_caller_memory m = NF_CALLER_MEMORY_INIT;
      m.memory = raw_of(image.memory);
      m.allocation_size = image.size;
      m.dedicated = true;
      return m;
    };
    nf_caller_memory in_mem = memory_of(input);
    nf_caller_memory out_mem = memory_of(output);
    nf_check(nf_context_register_input_image_with_memory(ctx, &in_desc, &in_mem, &in_id), "register the input");
    nf_check(nf_context_register_output_image_with_memory(ctx, &out_desc, &out_mem, &out_id), "register the output");
  } else {
    nf_check(nf_context_register_input_image(ctx, &in_desc, &in_id), "register the input");
    nf_check(nf_context_register_output_image(ctx, &out_desc, &out_id), "register the output");
  }
  nf_timeline rendered_id = 0, read_id = 0;
  nf_check(nf_context_register_timeline(ctx, raw_of(rendered), &rendered_id), "register \"rendered\"");
  nf_check(nf_context_register_timeline(ctx, raw_of(read), &read_id), "register \"read\"");

  // The frames: the GPU waits for the semaphores between the steps. The two command
  // buffers are recorded once without SIMULTANEOUS_USE, so the host resubmits each only
  // once its last submission has finished (the draw of frame n-1, the read of frame n-1).
  auto host_wait = [&](VkSemaphore s, uint64_t value, const char *what) {
    VkSemaphoreWaitInfo w{};
    w.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
    w.semaphoreCount = 1;
    w.pSemaphores = &s;
    w.pValues = &value;
    vk_check(vkWaitSemaphores(r.device, &w, 60000000000ull), what);
  };
  nf_ticket last = NF_TICKET_INIT;
  for (uint64_t n = 1; n <= a.frames; n++) {
    std::vector<std::pair<VkSemaphore, uint64_t>> draw_waits;
    if (last.value) draw_waits.emplace_back(semaphore_of(last.input_consumed_semaphore), last.input_consumed_value);
    if (n > 1) host_wait(rendered, n - 1, "vkWaitSemaphores (the last draw done)");
    submit(r, lock, draw, draw_waits, {{rendered, n}});
    nf_frame frame = NF_FRAME_INIT;
    frame.input = in_id;
    frame.output = out_id;
    frame.wait_timeline = rendered_id;
    frame.wait_value = n;
    if (n > 1) {  // the renderer's read of the last result comes first
      frame.output_free_timeline = read_id;
      frame.output_free_value = n - 1;
    }
    nf_ticket ticket = NF_TICKET_INIT;
    nf_check(nf_context_submit(ctx, &frame, &ticket), "nf_context_submit");
    if (ticket.value == 0) fail("a blocking ring dropped a frame");
    if (n > 1) host_wait(read, n - 1, "vkWaitSemaphores (the last read done)");
    submit(r, lock, read_back, {{semaphore_of(ticket.output_ready_semaphore), ticket.output_ready_value}}, {{read, n}});
    last = ticket;
  }
  VkSemaphoreWaitInfo wait{};
  wait.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wait.semaphoreCount = 1;
  wait.pSemaphores = &read;
  wait.pValues = &a.frames;
  vk_check(vkWaitSemaphores(r.device, &wait, 60000000000ull), "vkWaitSemaphores (the last result read)");
  nf_frame_stats stats = NF_FRAME_STATS_INIT;
  nf_check(nf_context_wait(ctx, last.value, &stats), "nf_context_wait");
  std::printf("%llu frames %ux%u -> %ux%u; the last: model %.2f ms, pre %.2f ms, post %.2f ms, %.2f ms in all, %s\n",
              static_cast<unsigned long long>(a.frames), w, h, ow, oh, stats.infer_ms, stats.pre_ms, stats.post_ms,
              stats.latency_ms, stats.cuda_passes ? "CUDA passes" : "Vulkan passes");

  std::vector<uint8_t> pixels(static_cast<const uint8_t *>(result.mapped),
                              static_cast<const uint8_t *>(result.mapped) + out_len);
  nf_check(nf_png_write(a.output.c_str(), pixels.data(), ow, oh), "nf_png_write");
  std::printf("wrote %s\n", a.output.c_str());

  int code = 0;
  if (a.compare) {
    // The same picture through a context of its own and the host path, for a byte-for-byte check.
    nf_context *own = nullptr;
    nf_check(nf_context_new(builder, &own), "nf_context_new");
    nf_check(nf_context_wait_settled(own, 300000, &settled), "nf_context_wait_settled");
    std::vector<uint8_t> want(out_len);
    nf_check(nf_context_infer_rgba8(own, picture, w, h, want.data(), want.size()), "nf_context_infer_rgba8");
    size_t differ = 0;
    for (size_t i = 0; i < out_len; i++) differ += want[i] != pixels[i];
    std::printf("equal to nf_context_infer_rgba8 byte for byte: %s (%zu bytes differ)\n", differ ? "no" : "yes", differ);
    if (differ) code = 2;
    nf_context_free(own);
  }

  // The context goes first: it borrows the renderer's device, images and semaphores.
  nf_check(nf_context_unregister_input(ctx, in_id), "nf_context_unregister_input");
  nf_context_free(ctx);
  nf_builder_free(builder);
  nf_queue_lock_free(lock);
  nf_pixels_free(picture);
  vk_check(vkDeviceWaitIdle(r.device), "vkDeviceWaitIdle");
  vkDestroyFence(r.device, fence, nullptr);
  vkDestroySemaphore(r.device, rendered, nullptr);
  vkDestroySemaphore(r.device, read, nullptr);
  for (Buffer *b : {&scene, &result}) {
    vkDestroyBuffer(r.device, b->buffer, nullptr);
    vkFreeMemory(r.device, b->memory, nullptr);
  }
  for (Image *i : {&input, &output}) {
    vkDestroyImage(r.device, i->image, nullptr);
    vkFreeMemory(r.device, i->memory, nullptr);
  }
  vkDestroyCommandPool(r.device, r.pool, nullptr);
  vkDestroyDevice(r.device, nullptr);
  vkDestroyInstance(r.instance, nullptr);
  return code;
}

}  // namespace

int main(int argc, char **argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "renderer: %s\n", e.what());
    return 1;
  }
}
