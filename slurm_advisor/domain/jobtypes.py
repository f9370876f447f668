"""Published facts about the job types we know: model size, compute per sample, input pipeline.

Parameter counts and forward FLOPs per sample are the commonly published figures for each
model (He et al. 2016 for ResNets; Simonyan & Zisserman 2015 for VGG-16; Szegedy et al. 2016
for Inception-v3; Vaswani et al. 2017 for the base Transformer; Devlin et al. 2019 for
BERT-base at 384 tokens; Redmon & Farhadi 2018 for YOLOv3 at 416 px). The per-worker usage
shares of CPU, memory bandwidth, PCIe and NIC are our documented estimates of how heavy each
model's input pipeline and host traffic are (JPEG decoding for ImageNet models, audio features
for DeepSpeech2, embedding look-ups for recommendation models); they drive the `contention`
ground truth. ``gavel`` and ``pollux`` name the measured model each type maps to.

A job whose type is not listed here is never an error: every consumer falls back to the job's
own features (declared model size, batch size, demands) through :func:`profile_for`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobTypeProfile:
    name: str
    params_m: float           # parameters, millions
    gflops_per_sample: float  # forward pass, GFLOPs per sample
    batch_size: int           # default per-worker batch
    cpu: float                # share of a node's CPU one worker uses (input pipeline)
    membw: float              # share of a node's memory bandwidth one worker uses
    pcie: float               # share of a node's PCIe bandwidth one worker uses (host<->GPU)
    gavel: str                # Gavel model name ("ResNet-50", "Transformer", ...)
    pollux: str               # Pollux model folder ("imagenet", "bert", ...)

    @property
    def model_size_mb(self) -> float:
        return self.params_m * 4.0  # fp32 parameters


KNOWN_TYPES: dict[str, JobTypeProfile] = {p.name: p for p in (
    JobTypeProfile("resnet18", 11.2, 0.56, 128, 0.06, 0.08, 0.06, "ResNet-18", "cifar10"),
    JobTypeProfile("resnet50", 25.6, 4.1, 64, 0.12, 0.12, 0.12, "ResNet-50", "imagenet"),
    JobTypeProfile("vgg16", 138.4, 15.5, 32, 0.10, 0.12, 0.15, "ResNet-50", "imagenet"),
    JobTypeProfile("inception3", 23.8, 5.7, 32, 0.10, 0.10, 0.10, "ResNet-50", "imagenet"),
    JobTypeProfile("transformer", 65.0, 3.9, 64, 0.05, 0.10, 0.05, "Transformer", "bert"),
    JobTypeProfile("bert", 110.0, 84.0, 12, 0.05, 0.10, 0.05, "Transformer", "bert"),
    JobTypeProfile("lstm", 28.0, 2.0, 40, 0.05, 0.10, 0.05, "LM", "deepspeech2"),
    JobTypeProfile("deepspeech2", 38.0, 30.0, 20, 0.10, 0.08, 0.08, "LM", "deepspeech2"),
    JobTypeProfile("ncf", 4.0, 0.002, 8192, 0.08, 0.15, 0.15, "Recommendation", "ncf"),
    JobTypeProfile("recommendation", 20.0, 0.004, 2048, 0.08, 0.15, 0.15, "Recommendation", "ncf"),
    JobTypeProfile("yolov3", 61.9, 65.9, 8, 0.12, 0.12, 0.12, "ResNet-50", "yolov3"),
    JobTypeProfile("a3c", 1.0, 0.05, 32, 0.20, 0.05, 0.02, "A3C", "cifar10"),
    JobTypeProfile("cyclegan", 28.0, 57.0, 1, 0.10, 0.10, 0.10, "CycleGAN", "imagenet"),
)}

# A job of an unknown type is judged by its declared size; these middle-of-the-road usage
# shares keep it from being either ignored or over-penalised.
_UNKNOWN = JobTypeProfile("unknown", 25.0, 4.0, 32, 0.10, 0.10, 0.10, "ResNet-50", "imagenet")


def profile_for(job_type: str, model_size_mb: float | None = None,
                batch_size: int | None = None) -> JobTypeProfile:
    """The profile of a job type; unknown types get a generic one sized from the job's fields."""
    known = KNOWN_TYPES.get(job_type.lower())
    base = known or _UNKNOWN
    params_m = model_size_mb / 4.0 if model_size_mb else base.params_m
    return JobTypeProfile(base.name if known else job_type, params_m, base.gflops_per_sample,
                          batch_size or base.batch_size, base.cpu, base.membw, base.pcie,
                          base.gavel, base.pollux)


# Effective fp32 throughput of one reference GPU (V100-class) on real training steps; fitted so
# that ResNet-50 at batch 64 runs ~4.4 iterations/s alone, as Gavel measured on a V100.
REFERENCE_GPU_GFLOPS = 3600.0


def reference_speed(profile: JobTypeProfile) -> float:
    """Iterations/s of one worker alone on a reference GPU: forward + backward = 3x forward."""
    step_s = 3.0 * profile.gflops_per_sample * profile.batch_size / REFERENCE_GPU_GFLOPS
    return 1.0 / (step_s + 0.01)  # 10 ms fixed per-step overhead (kernel launches, optimizer)
