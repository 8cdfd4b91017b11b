"""What an SMB share costs to keep true (``smb://``): the listing with each file's DACL
against the listing alone (``bench.smb.listing``), against Samba's AD DC on loopback
(scripts/samba-ad.sh) serving a folder filled on its disk."""
