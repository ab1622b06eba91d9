"""The lab's instruments, run beside the method: ablations (ablate), benchmarks (bench,
timing), the release converter (convert_release) and the GPU check (gpu_check)."""
