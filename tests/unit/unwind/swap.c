/* Two libraries of the same layout (libuw_swap_a.so, libuw_swap_b.so) for
 * the unwinder's cache test: uw_swap(leaf) calls leaf with the same return
 * address in both, but a frame of FRAME bytes; FILL(%rsp) is zeroed.  In
 * B, FILL is the slot where A's rule (a stale cache entry) would look for
 * the return address, so a stale rule ends the stack there. */
__asm__(".text\n"
	".globl uw_swap\n"
	".type uw_swap,@function\n"
	"uw_swap:\n"
	".cfi_startproc\n"
	"sub $" FRAME ", %rsp\n"
	".cfi_def_cfa_offset " FRAME "+8\n"
	"movq $0, " FILL "(%rsp)\n"
	"call *%rdi\n"
	"add $" FRAME ", %rsp\n"
	".cfi_def_cfa_offset 8\n"
	"ret\n"
	".cfi_endproc\n"
	".size uw_swap, .-uw_swap\n");
