# SHT_LLVM_BB_ADDR_MAP version 4 (LLVM main between PR #160706 and #163252, never
# released): u8 feature, callsite END offsets (bit 5) and a u64 block hash (bit 6).
	.text
	.globl	v4_leaf
	.type	v4_leaf,@function
v4_leaf:
.Lg0:
	leal	2(%rdi), %eax
	retq
.Lg0_b0_end:
	.size	v4_leaf, .-v4_leaf

	.globl	v4_caller
	.type	v4_caller,@function
v4_caller:
.Lg1:
	pushq	%rbx
	movl	%edi, %ebx
	callq	v4_leaf
.Lg1_b0_cs0:
	testl	%eax, %eax
	je	.Lg1_b2
.Lg1_b0_end:
.Lg1_b1:
	addl	%eax, %ebx
	jmp	v4_leaf
.Lg1_b1_end:
.Lg1_b2:
	movl	%ebx, %eax
	popq	%rbx
	retq
.Lg1_b2_end:
	.size	v4_caller, .-v4_caller

	.globl	_start
	.type	_start,@function
_start:
	movl	$5, %edi
	callq	v4_caller
	movl	$60, %eax
	xorl	%edi, %edi
	syscall
	.size	_start, .-_start

	.section	.llvm_bb_addr_map,"o",@0x6fff4c0a,.text
	.byte	4                               # version
	.byte	0x60                            # feature: callsites + hash
	.quad	.Lg0
	.byte	1
	.byte	0
	.uleb128 .Lg0-.Lg0
	.byte	0                               # no callsites
	.uleb128 .Lg0_b0_end-.Lg0
	.byte	1
	.quad	0x0123456789abcdef              # hash
	.byte	4
	.byte	0x60
	.quad	.Lg1
	.byte	3
	.byte	0                               # BB 0: one call, END offset
	.uleb128 .Lg1-.Lg1
	.byte	1
	.uleb128 .Lg1_b0_cs0-.Lg1
	.uleb128 .Lg1_b0_end-.Lg1_b0_cs0
	.byte	8
	.quad	0xfedcba9876543210
	.byte	1                               # BB 1: tail call
	.uleb128 .Lg1_b1-.Lg1_b0_end
	.byte	0
	.uleb128 .Lg1_b1_end-.Lg1_b1
	.byte	3
	.quad	0x8000000000000001
	.byte	2                               # BB 2: return
	.uleb128 .Lg1_b2-.Lg1_b1_end
	.byte	0
	.uleb128 .Lg1_b2_end-.Lg1_b2
	.byte	1
	.quad	0x00000000000000ff
	.section	.note.GNU-stack,"",@progbits
