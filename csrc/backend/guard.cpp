// What torch asks of a device outside the dispatcher (lesson 09): a device guard and the PrivateUse1 hooks. The
// "device" layer (device.cpp) holds the kernels; without this file, `.to("<name>")` (a device with no index: the
// current one) fails with "PyTorch is not linked with support for <name> devices".
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace workbook::device {
namespace {

const c10::Device kDevice(c10::DeviceType::PrivateUse1, 0);

// ---- Device guard: which device is current (asked for a device given without an index), making one current
// (DeviceGuard), and how many there are ---------------------------------------------------------------------------

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device device) const override {
    setDevice(device);
    return kDevice;
  }
  c10::Device getDevice() const override { return kDevice; }
  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.index() <= 0, "the workbook's device has one index, 0; got ", device);
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device device) const override { return c10::Stream(c10::Stream::DEFAULT, device); }
  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }  // one stream: work is synchronous
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  // torch.accelerator.synchronize() waits here for the device's queued work. Ours runs each kernel to the end before
  // it returns: nothing to wait for. (New streams and events keep the interface's defaults, which refuse: lesson 09.)
  void synchronizeDevice(c10::DeviceIndex) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// ---- Hooks: what torch asks a PrivateUse1 backend outside the dispatcher (the autograd engine asks
// hasPrimaryContext before it runs a backward on the device) ----------------------------------------------------

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
};

const bool hooks_registered = (at::RegisterPrivateUse1HooksInterface(new Hooks), true);

}  // namespace
}  // namespace workbook::device
