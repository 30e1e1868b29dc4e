"""Exercise 07.layer_cost (hard): what a layer costs, measured as lesson 07 measures it.

Write `layer_cost(time_with, time_without, rounds)`. Each call of `time_with()` times one call of an operator with a
layer (an Autograd kernel, say) and returns microseconds; `time_without()` the same call without the layer. Return the
layer's cost as (median, first quartile, third quartile) in microseconds (any usual definition of a quartile), over
`rounds` rounds, each of which times each side once, or None when no cost stands out of the machine's noise (lesson 07's
rule: a cost only where the whole interquartile range of the differences lies above zero). The check hands you made-up
timers, and counts your calls: a steady machine, one that slows down as it runs, two with spikes, three quiet ones with
small layers (20 ns, 5 ns, and 0.2 ns timed by timers that each average many calls), and four where the layer costs
nothing, one of them noisy, one whose timer counts whole steps, and one where the second call of a round runs faster
than the first, whichever side it times (over 15 rounds and over 9), a layer on a machine where that advantage fades as
it runs, one where it grows, and one smaller than the coarse timer's step; over an odd and an even number of rounds; two
measurements at once, in two threads taking turns call by call, and one inside a timer of another. The timers are called
as the caller would call them (its autocast region, grad and inference mode, anomaly detection, cuDNN's and oneDNN's
flags, the default dtype, its TorchDispatchModes, autocast's cast cache, __torch_function__, the autograd fallback's
mode, garbage collection, torch's threads, Python's thread switch interval as they are), and they alone: the caller's
modes see no operator of your own. A timer's error passes through. Each call measures anew, the same timers given again
too. A measurement leaves the process's settings (garbage collection: on or off, its thresholds, callbacks and debug
flags, frozen objects; torch's threads; Python's, numpy's and torch's random numbers, CUDA's seeds included; numpy's
handling of floating-point errors (numpy.seterr); the process's priority and scheduling policy; the interpreter's thread
switch interval, trace and profile functions (cProfile's too); the CPUs the process may run on; faulthandler (on or off,
and its watchdog); the signal handlers (Ctrl-C's among them); whether denormal numbers flush to zero; cuDNN's and
oneDNN's flags, deterministic algorithms, float32 matmul precision, anomaly detection; the warning filters, the levels
of log messages switched off and each logger's level; Python's memory tracing, tracemalloc; its standard streams;
torch's default dtype; the environment variables, which the processes it starts inherit) as it found them, for the
threads started while it times, and those that ran before it, too, and when a timer raises; so does importing your file.
Threads it starts end with it, it keeps nothing of a measurement once it returns (the timers, what they refer to), and
it runs no garbage collection of its own (gc.collect).
"""

import statistics


def layer_cost(time_with, time_without, rounds: int):
    with_ = [time_with() for _ in range(rounds)]  # TODO: is this the way to measure a difference?
    without = [time_without() for _ in range(rounds)]
    return statistics.mean(with_) - statistics.mean(without), 0.0, 0.0
