"""The lab's instruments, run beside the method: ablations (ablate; its figures and report:
ablation, ablation_report), benchmarks (bench, timing), the release converter
(convert_release) and the GPU check (gpu_check)."""
