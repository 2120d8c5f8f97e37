#include "textflag.h"

// func Pause(cycles uint32)
TEXT ·Pause(SB),NOSPLIT,$0-4
	MOVL	cycles+0(FP), AX
	TESTL	AX, AX
	JZ	done
again:
	PAUSE
	SUBL	$1, AX
	JNZ	again
done:
	RET
