"""Expected frames of upstream dpif-netdev.at tests 1122-1133 (IPv4/IPv6 vxlan tunnel -
*), transcribed as facts: the AT_DATA hex and the sed substitutions that derive
the other expectations.  Used as independent cross-check vectors for the model."""

TUNNEL_TESTS = {
    'IPv4 vxlan tunnel - no offload': {
        "data": {
            'arp_frame': (
                'ffffffffffff04bf1bd82d2d080600010800060400018abf7e2f0584c0a80111000000000000'
                'c0a87b01'
            ),
            'arp_expected': (
                'aa66aa660001aa66aa66000008004500004e00004000401133ea010102580101025ce01312b5'
                '003a00000800000000007b00ffffffffffff04bf1bd82d2d080600010800060400018abf7e2f'
                '0584c0a80111000000000000c0a87b01'
            ),
            'ndp_frame': (
                '3333ff00000104bf1bd82d2d86dd6000000000203afffe800000000000000000000000000002'
                'ff0200000000000000000001ff00000187006e2600000000fe80000000000000000000000000'
                '000101018abf7e2f0584'
            ),
            'ndp_expected': (
                'aa66aa660001aa66aa66000008004500007a00004000401133be010102580101025ce01312b5'
                '006600000800000000007b003333ff00000104bf1bd82d2d86dd6000000000203afffe800000'
                '000000000000000000000002ff0200000000000000000001ff00000187006e2600000000fe80'
                '000000000000000000000000000101018abf7e2f0584'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('arp_expected', 'e01312b5003a0000', 'e01312b5003a1354', None, None, 'arp_csum_expected'),
            ('ndp_expected', 'e01312b500660000', 'e01312b50066e106', None, None, 'ndp_csum_expected'),
        ],
    },
    'IPv4 vxlan tunnel - ip csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f0584080045000068000000000006433cc0a87b02c0a87b01d4781451'
                '0000000000000000501000006b720000000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000008004500009a000040004011339e010102580101025ce01312b5'
                '008600000800000000007b000a8f394fe0738abf7e2f0584080045000068000000000006bd3c'
                'c0a87b02c0a80101d4781451000000000000000050100000e572000000010203040506070809'
                '0a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f'
                '303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '433c', '423c', None, None, 'bad_frame'),
            ('good_expected', 'bd3c', 'bc3c', None, None, 'bad_expected'),
            ('good_expected', '339e', '0000', 'bd3c', '423c', 'half_bad_expected'),
            ('good_expected', 'bd3c', '423c', None, None, 'half_bad_expected'),
            ('good_expected', 'e01312b500860000', 'e01312b50086454d', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b500860000', 'e01312b50086464d', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '339e', '0000', None, None, 'half_bad_csum_expected'),
            ('good_csum_expected', '339e', '0000', 'bd3c', '423c', 'half_bad_csum_expected'),
            ('good_csum_expected', 'bd3c', '423c', None, None, 'half_bad_csum_expected'),
        ],
    },
    'IPv4 vxlan tunnel - tcp csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f0584080045000068000000000006433cc0a87b02c0a87b01d4781451'
                '0000000000000000501000006b720000000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000008004500009a000040004011339e010102580101025ce01312b5'
                '008600000800000000007b000a8f394fe0738abf7e2f0584080045000068000000000006433c'
                'c0a87b02c0a87b01d47808ae0000000000000000501000007715000000010203040506070809'
                '0a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f'
                '303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '6b72', 'dead', None, None, 'bad_frame'),
            ('good_expected', '7715', 'ea50', None, None, 'bad_expected'),
            ('good_expected', '7715', 'dead', None, None, 'bad_updated'),
            ('good_expected', 'e01312b500860000', 'e01312b50086bf4d', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b500860000', 'e01312b500864c12', None, None, 'bad_csum_expected'),
            ('good_csum_expected', 'bf4d', 'ffff', '7715', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', '7715', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv4 vxlan tunnel - udp csum offload': {
        "data": {
            'no_csum_frame': (
                '0a8f394fe0738abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d4781451'
                '00480000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021'
                '22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'no_csum_expected': (
                'aa66aa660001aa66aa66000008004500008e00004000401133aa010102580101025ce01312b5'
                '007a00000800000000007b000a8f394fe0738abf7e2f058408004500005c000000000011433d'
                'c0a87b02c0a87b01d47808ae00480000000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
            'good_frame': (
                '0a8f394fe0738abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d4781451'
                '0048bb3b000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021'
                '22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000008004500008e00004000401133aa010102580101025ce01312b5'
                '007a00000800000000007b000a8f394fe0738abf7e2f058408004500005c000000000011433d'
                'c0a87b02c0a87b01d47808ae0048c6de000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', 'bb3b', 'dead', None, None, 'bad_frame'),
            ('good_expected', 'c6de', 'ea50', None, None, 'bad_expected'),
            ('good_expected', 'c6de', 'dead', None, None, 'bad_updated'),
            ('no_csum_expected', 'e01312b5007a0000', 'e01312b5007a8643', None, None, 'out_no_csum_expected'),
            ('good_expected', 'e01312b5007a0000', 'e01312b5007abf64', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5007a0000', 'e01312b5007a9bf2', None, None, 'bad_csum_expected'),
            ('good_csum_expected', 'bf64', 'ffff', 'c6de', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', 'c6de', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv4 vxlan tunnel - IPv6 tcp csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000540640fe800000000000000000000000000002'
                'fe800000000000000000000000000001d4781451000000000000000050100000e5c200000001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa6600000800450000ae000040004011338a010102580101025ce01312b5'
                '009a00000800000000007b000a8f394fe0738abf7e2f058486dd6000000000540640fe800000'
                '000000000000000000000002fe800000000000000000000000000001d47808ae000000000000'
                '000050100000f1650000000102030405060708090a0b0c0d0e0f101112131415161718191a1b'
                '1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', 'e5c2', 'dead', None, None, 'bad_frame'),
            ('good_expected', 'f165', 'ea50', None, None, 'bad_expected'),
            ('good_expected', 'f165', 'dead', None, None, 'bad_updated'),
            ('good_expected', 'e01312b5009a0000', 'e01312b5009a625e', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5009a0000', 'e01312b5009a6973', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '625e', 'ffff', 'f165', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', 'f165', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv4 vxlan tunnel - IPv6 udp csum offload': {
        "data": {
            'no_csum_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000481140fe800000000000000000000000000002'
                'fe800000000000000000000000000001d478145100480000000102030405060708090a0b0c0d'
                '0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233'
                '3435363738393a3b3c3d3e3f'
            ),
            'no_csum_expected': (
                'aa66aa660001aa66aa6600000800450000a20000400040113396010102580101025ce01312b5'
                '008e00000800000000007b000a8f394fe0738abf7e2f058486dd6000000000481140fe800000'
                '000000000000000000000002fe800000000000000000000000000001d47808ae004800000001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000481140fe800000000000000000000000000002'
                'fe800000000000000000000000000001d47814510048358c000102030405060708090a0b0c0d'
                '0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233'
                '3435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa6600000800450000a20000400040113396010102580101025ce01312b5'
                '008e00000800000000007b000a8f394fe0738abf7e2f058486dd6000000000481140fe800000'
                '000000000000000000000002fe800000000000000000000000000001d47808ae0048412f0001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '358c', 'dead', None, None, 'bad_frame'),
            ('good_expected', '412f', 'ea50', None, None, 'bad_expected'),
            ('good_expected', '412f', 'dead', None, None, 'bad_updated'),
            ('no_csum_expected', 'e01312b5008e0000', 'e01312b5008e98b0', None, None, 'out_no_csum_expected'),
            ('good_expected', 'e01312b5008e0000', 'e01312b5008e5781', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5008e0000', 'e01312b5008eae5f', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '5781', 'ffff', '412f', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', '412f', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv6 vxlan tunnel - no offload': {
        "data": {
            'arp_frame': (
                'ffffffffffff04bf1bd82d2d080600010800060400018abf7e2f0584c0a80111000000000000'
                'c0a87b01'
            ),
            'arp_expected': (
                'aa66aa660001aa66aa66000086dd60000000003a11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5003a00000800000000007b00ffffffffffff'
                '04bf1bd82d2d080600010800060400018abf7e2f0584c0a80111000000000000c0a87b01'
            ),
            'ndp_frame': (
                '3333ff00000104bf1bd82d2d86dd6000000000203afffe800000000000000000000000000002'
                'ff0200000000000000000001ff00000187006e2600000000fe80000000000000000000000000'
                '000101018abf7e2f0584'
            ),
            'ndp_expected': (
                'aa66aa660001aa66aa66000086dd60000000006611402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5006600000800000000007b003333ff000001'
                '04bf1bd82d2d86dd6000000000203afffe800000000000000000000000000002ff0200000000'
                '000000000001ff00000187006e2600000000fe80000000000000000000000000000101018abf'
                '7e2f0584'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('arp_expected', 'e01312b5003a0000', 'e01312b5003a42f0', None, None, 'arp_csum_expected'),
            ('ndp_expected', 'e01312b500660000', 'e01312b5006610a3', None, None, 'ndp_csum_expected'),
        ],
    },
    'IPv6 vxlan tunnel - ip csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f0584080045000068000000000006433cc0a87b02c0a87b01d4781451'
                '0000000000000000501000006b720000000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000086dd60000000008611402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5008600000800000000007b000a8f394fe073'
                '8abf7e2f0584080045000068000000000006bd3cc0a87b02c0a80101d4781451000000000000'
                '000050100000e5720000000102030405060708090a0b0c0d0e0f101112131415161718191a1b'
                '1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '433c', '423c', None, None, 'bad_frame'),
            ('good_expected', 'bd3c', 'bc3c', None, None, 'bad_expected'),
            ('good_expected', '339e', '0000', 'bd3c', '423c', 'half_bad_expected'),
            ('good_expected', 'bd3c', '423c', None, None, 'half_bad_expected'),
            ('good_expected', 'e01312b500860000', 'e01312b5008674e9', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b500860000', 'e01312b5008675e9', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '339e', '0000', None, None, 'half_bad_csum_expected'),
            ('good_csum_expected', '339e', '0000', 'bd3c', '423c', 'half_bad_csum_expected'),
            ('good_csum_expected', 'bd3c', '423c', None, None, 'half_bad_csum_expected'),
        ],
    },
    'IPv6 vxlan tunnel - tcp csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f0584080045000068000000000006433cc0a87b02c0a87b01d4781451'
                '0000000000000000501000006b720000000102030405060708090a0b0c0d0e0f101112131415'
                '161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b'
                '3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000086dd60000000008611402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5008600000800000000007b000a8f394fe073'
                '8abf7e2f0584080045000068000000000006433cc0a87b02c0a87b01d47808ae000000000000'
                '00005010000077150000000102030405060708090a0b0c0d0e0f101112131415161718191a1b'
                '1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '6b72', 'dead', None, None, 'bad_frame'),
            ('good_expected', '7715', 'ea50', None, None, 'bad_expected'),
            ('good_expected', '7715', 'dead', None, None, 'bad_updated'),
            ('good_expected', 'e01312b500860000', 'e01312b50086eee9', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b500860000', 'e01312b500867bae', None, None, 'bad_csum_expected'),
            ('good_csum_expected', 'eee9', 'ffff', '7715', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', '7715', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv6 vxlan tunnel - udp csum offload': {
        "data": {
            'no_csum_frame': (
                '0a8f394fe0738abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d4781451'
                '00480000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021'
                '22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'no_csum_expected': (
                'aa66aa660001aa66aa66000086dd60000000007a11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5007a00000800000000007b000a8f394fe073'
                '8abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d47808ae004800000001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_frame': (
                '0a8f394fe0738abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d4781451'
                '0048bb3b000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021'
                '22232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000086dd60000000007a11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5007a00000800000000007b000a8f394fe073'
                '8abf7e2f058408004500005c000000000011433dc0a87b02c0a87b01d47808ae0048c6de0001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', 'bb3b', 'dead', None, None, 'bad_frame'),
            ('good_expected', 'c6de', 'ea50', None, None, 'bad_expected'),
            ('good_expected', 'c6de', 'dead', None, None, 'bad_updated'),
            ('no_csum_expected', 'e01312b5007a0000', 'e01312b5007ab5df', None, None, 'out_no_csum_expected'),
            ('good_expected', 'e01312b5007a0000', 'e01312b5007aef00', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5007a0000', 'e01312b5007acb8e', None, None, 'bad_csum_expected'),
            ('good_csum_expected', 'ef00', 'ffff', 'c6de', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', 'c6de', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv6 vxlan tunnel - IPv6 tcp csum offload': {
        "data": {
            'good_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000540640fe800000000000000000000000000002'
                'fe800000000000000000000000000001d4781451000000000000000050100000e5c200000001'
                '02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324252627'
                '28292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000086dd60000000009a11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5009a00000800000000007b000a8f394fe073'
                '8abf7e2f058486dd6000000000540640fe800000000000000000000000000002fe8000000000'
                '00000000000000000001d47808ae000000000000000050100000f16500000001020304050607'
                '08090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d'
                '2e2f303132333435363738393a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', 'e5c2', 'dead', None, None, 'bad_frame'),
            ('good_expected', 'f165', 'ea50', None, None, 'bad_expected'),
            ('good_expected', 'f165', 'dead', None, None, 'bad_updated'),
            ('good_expected', 'e01312b5009a0000', 'e01312b5009a91fa', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5009a0000', 'e01312b5009a990f', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '91fa', 'ffff', 'f165', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', 'f165', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
    'IPv6 vxlan tunnel - IPv6 udp csum offload': {
        "data": {
            'no_csum_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000481140fe800000000000000000000000000002'
                'fe800000000000000000000000000001d478145100480000000102030405060708090a0b0c0d'
                '0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233'
                '3435363738393a3b3c3d3e3f'
            ),
            'no_csum_expected': (
                'aa66aa660001aa66aa66000086dd60000000008e11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5008e00000800000000007b000a8f394fe073'
                '8abf7e2f058486dd6000000000481140fe800000000000000000000000000002fe8000000000'
                '00000000000000000001d47808ae00480000000102030405060708090a0b0c0d0e0f10111213'
                '1415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839'
                '3a3b3c3d3e3f'
            ),
            'good_frame': (
                '0a8f394fe0738abf7e2f058486dd6000000000481140fe800000000000000000000000000002'
                'fe800000000000000000000000000001d47814510048358c000102030405060708090a0b0c0d'
                '0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233'
                '3435363738393a3b3c3d3e3f'
            ),
            'good_expected': (
                'aa66aa660001aa66aa66000086dd60000000008e11402001cafe000000000000000000000088'
                '2001cafe000000000000000000000092e01312b5008e00000800000000007b000a8f394fe073'
                '8abf7e2f058486dd6000000000481140fe800000000000000000000000000002fe8000000000'
                '00000000000000000001d47808ae0048412f000102030405060708090a0b0c0d0e0f10111213'
                '1415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839'
                '3a3b3c3d3e3f'
            ),
        },
        # (source, old, new, old2, new2, result): result = source with old->new (and old2->new2)
        "subs": [
            ('good_frame', '358c', 'dead', None, None, 'bad_frame'),
            ('good_expected', '412f', 'ea50', None, None, 'bad_expected'),
            ('good_expected', '412f', 'dead', None, None, 'bad_updated'),
            ('no_csum_expected', 'e01312b5008e0000', 'e01312b5008ec84c', None, None, 'out_no_csum_expected'),
            ('good_expected', 'e01312b5008e0000', 'e01312b5008e871d', None, None, 'good_csum_expected'),
            ('bad_expected', 'e01312b5008e0000', 'e01312b5008eddfb', None, None, 'bad_csum_expected'),
            ('good_csum_expected', '871d', 'ffff', '412f', 'dead', 'bad_csum_updated'),
            ('good_csum_expected', '412f', 'dead', None, None, 'bad_csum_updated'),
        ],
    },
}
