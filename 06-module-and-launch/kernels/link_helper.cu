// The defining half of lesson 06's cuLink pair: a device function, no kernel. Built with
// -rdc=true (lesson.mk) it stays in the PTX as a `.visible .func` for other modules to
// call; whole-program compilation would drop it, since nothing in this file calls it.
extern "C" __device__ float linkedTransform(float x) {
    return 2.0f * x + 1.0f;
}
