# The July 2020 ".bb_info" proposal (seed 004): PROGBITS section linked to .text;
# per function: pointer-sized address, ULEB block count, then per block ULEB offset
# from the function begin, size and metadata -- except the entry block, whose offset
# is omitted "as it is always zero".  Block labels are real symbols (bi_*) so the
# symbol table is an independent oracle for the decoded addresses.
	.text
	.globl	bi_one
	.type	bi_one,@function
bi_one:
	cmpl	$1, %edi
	jle	bi_one_bb2
bi_one_bb1:
	leal	-1(%rdi), %edi
	jmp	bi_one
bi_one_bb2:
	movl	%edi, %eax
	retq
bi_one_end:
	.size	bi_one, .-bi_one

	.p2align 4, 0x90
	.globl	bi_two
	.type	bi_two,@function
bi_two:
	movl	%edi, %eax
	retq
bi_two_end:
	.size	bi_two, .-bi_two

	.globl	_start
	.type	_start,@function
_start:
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
	.size	_start, .-_start

	.section	.bb_info,"o",@progbits,.text
	.quad	bi_one_start_local
	.uleb128 3
	.uleb128 bi_one_bb1-bi_one              # entry block: size only
	.byte	0
	.uleb128 bi_one_bb1-bi_one              # block 1: offset from function begin
	.uleb128 bi_one_bb2-bi_one_bb1
	.byte	0
	.uleb128 bi_one_bb2-bi_one
	.uleb128 bi_one_end-bi_one_bb2
	.byte	1                               # return
	.quad	bi_two_start_local
	.uleb128 1
	.uleb128 bi_two_end-bi_two
	.byte	1
	.set	bi_one_start_local, bi_one
	.set	bi_two_start_local, bi_two
	.section	.note.GNU-stack,"",@progbits
