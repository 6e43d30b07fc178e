# LLVM 11 -fbasic-block-sections=labels, written by hand: every non-entry block N of a
# function gets a local symbol of N letters + ".BB." + name; the first letter is block
# N's kind (a plain, r return, l landing pad, L landing pad that returns).
	.text
	.globl	lab_foo
	.type	lab_foo,@function
lab_foo:                        # block 0 (entry)
	testl	%edi, %edi
	je	ra.BB.lab_foo
a.BB.lab_foo:                   # block 1: plain
	addl	$1, %edi
	cmpl	$10, %edi
	jg	aLlra.BB.lab_foo
ra.BB.lab_foo:                  # block 2: return
	movl	%edi, %eax
	retq
	.size	ra.BB.lab_foo, .-ra.BB.lab_foo
lra.BB.lab_foo:                 # block 3: landing pad
	movq	%rax, %rdi
	nop
	.size	lra.BB.lab_foo, .-lra.BB.lab_foo
Llra.BB.lab_foo:                # block 4: landing pad that returns
	xorl	%eax, %eax
	retq
	.size	Llra.BB.lab_foo, .-Llra.BB.lab_foo
aLlra.BB.lab_foo:               # block 5: plain (unsized: size from the function end)
	movl	$7, %eax
	retq
.Lfoo_end:
	.size	lab_foo, .Lfoo_end-lab_foo

	.p2align 4
	.globl	lab_bar
	.type	lab_bar,@function
lab_bar:
	cmpl	$3, %edi
	jl	ra.BB.lab_bar
a.BB.lab_bar:
	imull	%edi, %edi
ra.BB.lab_bar:
	movl	%edi, %eax
	retq
.Lbar_end:
	.size	lab_bar, .Lbar_end-lab_bar

	.globl	_start
	.type	_start,@function
_start:
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
	.size	_start, .-_start
	.section	.note.GNU-stack,"",@progbits
