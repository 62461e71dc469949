int ymtop_bench_empty;
