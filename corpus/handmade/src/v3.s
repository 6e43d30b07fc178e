# SHT_LLVM_BB_ADDR_MAP version 3 (LLVM 21): callsite BEGIN offsets (label before the
# call), feature bit 5 only on functions with calls; the size field counts from the
# last callsite label to the block end.
	.text
	.globl	v3_leaf
	.type	v3_leaf,@function
v3_leaf:
.Lf0:
	leal	1(%rdi), %eax
	retq
.Lf0_b0_end:
	.size	v3_leaf, .-v3_leaf

	.globl	v3_caller
	.type	v3_caller,@function
v3_caller:
.Lf1:
	pushq	%rbx
	movl	%edi, %ebx
	testl	%edi, %edi
	je	.Lf1_b2
.Lf1_b0_end:
.Lf1_b1:
.Lf1_b1_cs0:
	callq	v3_leaf
	movl	%eax, %edi
.Lf1_b1_cs1:
	callq	v3_leaf
	addl	%eax, %ebx
.Lf1_b1_end:
	.p2align 3, 0x90
.Lf1_b2:
	movl	%ebx, %eax
	popq	%rbx
	retq
.Lf1_b2_end:
	.size	v3_caller, .-v3_caller

	.globl	_start
	.type	_start,@function
_start:
	movl	$5, %edi
	callq	v3_caller
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
	.size	_start, .-_start

	.section	.llvm_bb_addr_map,"o",@0x6fff4c0a,.text
	.byte	3                               # version
	.byte	0                               # feature: no calls in v3_leaf
	.quad	.Lf0                            # function address
	.byte	1                               # number of blocks
	.byte	0                               # BB id
	.uleb128 .Lf0-.Lf0                      # offset
	.uleb128 .Lf0_b0_end-.Lf0               # size
	.byte	1                               # metadata: return
	.byte	3                               # version
	.byte	0x20                            # feature: callsite offsets
	.quad	.Lf1
	.byte	3
	.byte	0                               # BB 0
	.uleb128 .Lf1-.Lf1
	.byte	0                               # no callsites
	.uleb128 .Lf1_b0_end-.Lf1
	.byte	8                               # can fall through
	.byte	1                               # BB 1
	.uleb128 .Lf1_b1-.Lf1_b0_end
	.byte	2                               # two callsites
	.uleb128 .Lf1_b1_cs0-.Lf1_b1            # begin of call 1, from the block start
	.uleb128 .Lf1_b1_cs1-.Lf1_b1_cs0        # begin of call 2, from call 1
	.uleb128 .Lf1_b1_end-.Lf1_b1_cs1        # size after the last callsite
	.byte	8
	.byte	2                               # BB 2 (after alignment padding)
	.uleb128 .Lf1_b2-.Lf1_b1_end
	.byte	0
	.uleb128 .Lf1_b2_end-.Lf1_b2
	.byte	1
	.section	.note.GNU-stack,"",@progbits
